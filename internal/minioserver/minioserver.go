// Package minioserver runs a MinIO server on loopback, one per process, for
// tests (through internal/testutil) and for programs that are not tests
// (cmd/bench): it does not link package testing.
package minioserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Server is a MinIO server on loopback shared by one process.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Region    string

	cmd *exec.Cmd
	dir string
}

var minio struct {
	once sync.Once
	srv  *Server
	err  error
}

// Binary finds the minio server: $ART_MINIO, PATH, then $GOPATH/bin
// (where `go install github.com/minio/minio@latest` puts it).
func Binary() (string, error) {
	if p := os.Getenv("ART_MINIO"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	p := filepath.Join(gopath, "bin", "minio")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no minio binary (set ART_MINIO, or go install github.com/minio/minio@latest)")
	}
	return p, nil
}

// Start returns the process's server, starting it on first use with a
// fresh data directory. The server dies with the process (parent-death
// signal); Stop also removes its data.
func Start() (*Server, error) {
	minio.once.Do(func() { minio.srv, minio.err = startMinIO() })
	return minio.srv, minio.err
}

// Stop stops the server Start started, if any, and removes its data.
func Stop() {
	if s := minio.srv; s != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		os.RemoveAll(s.dir)
	}
}

func startMinIO() (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "art-minio-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	key := make([]byte, 12)
	rand.Read(key)
	s := &Server{Endpoint: "http://" + addr, AccessKey: "art" + hex.EncodeToString(key[:4]),
		SecretKey: hex.EncodeToString(key), Region: "us-east-1", dir: dir}
	cmd := exec.Command(bin, "server", "--quiet", "--address", addr, "--console-address", "127.0.0.1:0", filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1")
	log, err := os.Create(filepath.Join(dir, "minio.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.cmd = cmd
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.Endpoint+"/minio/health/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			cmd.Process.Kill()
			cmd.Wait()
			b, _ := os.ReadFile(filepath.Join(dir, "minio.log"))
			return nil, fmt.Errorf("minio on %s not ready after 60s: %s", addr, b)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
