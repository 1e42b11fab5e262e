package testutil

import (
	"testing"

	"github.com/artrt/art/internal/minioserver"
)

// MinIOServer is a MinIO server on loopback shared by one test process.
type MinIOServer = minioserver.Server

// MinIO returns the process's MinIO server, starting it on first use with
// a fresh data directory. It calls Require(t, "minio") first. The server
// dies with the test process (parent-death signal); StopMinIO, called from
// TestMain, also removes its data.
func MinIO(t testing.TB) *MinIOServer {
	t.Helper()
	Require(t, "minio")
	srv, err := minioserver.Start()
	if err != nil {
		t.Fatalf("start minio: %v", err)
	}
	return srv
}

// StopMinIO stops the server MinIO started, if any, and removes its data.
func StopMinIO() { minioserver.Stop() }
