package execapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Executor runs one validated request. The Server has set
// req.ExecutionID; Exec returns a response with at least status and
// exit_code set (never nil), and must not panic on any request Validate
// accepted. The Runner is the process executor; art wires a sandboxed one.
type Executor interface {
	Exec(ctx context.Context, req *Request) *Response
}

// Mode is how Serve reads its input.
type Mode int

const (
	// One reads a single request (the whole input) and writes one response.
	One Mode = iota
	// JSONL reads one request per line until EOF and answers each in
	// order, one response per line; a bad line gets an error response and
	// the stream goes on.
	JSONL
)

// Server decodes, validates and answers requests.
type Server struct {
	Executor Executor
	Policy   Policy
	Now      func() time.Time // nil: time.Now
	NewID    func() string    // nil: NewExecutionID
}

// NewExecutionID returns "ex-" and 16 random hex digits.
func NewExecutionID() string {
	var b [8]byte
	rand.Read(b[:])
	return "ex-" + hex.EncodeToString(b[:])
}

// Serve answers the requests of in on out, in order, and returns nil at
// the end of the input. It returns an error only when it cannot read in
// or write out; every problem of a request is answered in its response.
// Requests run one at a time, so responses are in request order.
func (s *Server) Serve(ctx context.Context, in io.Reader, out io.Writer, mode Mode) error {
	if mode == One {
		data, err := io.ReadAll(io.LimitReader(in, MaxRequestBytes+1))
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		return s.reply(out, s.Handle(ctx, data))
	}
	br := bufio.NewReaderSize(in, 64<<10)
	for line := 1; ; line++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, tooLong, err := readLine(br)
		if len(bytes.TrimSpace(data)) > 0 || tooLong {
			resp := s.Handle(ctx, data)
			if tooLong {
				resp = s.stamp(Failed(Errorf(CodeTooLarge, "line %d is longer than %d bytes", line, MaxRequestBytes).
					with("limit", MaxRequestBytes).with("line", line)), s.clock())
			}
			if werr := s.reply(out, resp); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read request line %d: %w", line, err)
		}
	}
}

// readLine reads one line without its newline. A line longer than
// MaxRequestBytes is consumed and reported as tooLong with no data.
func readLine(br *bufio.Reader) (data []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(data)+len(chunk) > MaxRequestBytes+1 {
				tooLong, data = true, nil
			} else {
				data = append(data, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(data, []byte("\n")), tooLong, err
	}
}

// Handle answers one request document.
func (s *Server) Handle(ctx context.Context, data []byte) *Response {
	received := s.clock()
	req, e := Decode(data)
	if e == nil {
		e = s.Policy.Validate(req)
	}
	if e != nil {
		return s.stamp(Failed(e), received)
	}
	req.ExecutionID = s.newID()
	resp := s.Executor.Exec(ctx, req)
	if resp == nil {
		resp = Failed(Errorf(CodeExecFailed, "the executor returned no response"))
	}
	resp.ExecutionID = req.ExecutionID
	return s.stamp(resp, received)
}

func (s *Server) stamp(resp *Response, received time.Time) *Response {
	resp.APIVersion = APIVersion
	if resp.ExecutionID == "" {
		resp.ExecutionID = s.newID()
	}
	resp.Timestamps.Received = Stamp(received)
	resp.Timestamps.Finished = Stamp(s.clock())
	return resp
}

func (s *Server) reply(out io.Writer, resp *Response) error {
	b, err := Encode(resp)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	if _, err := out.Write(b); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

func (s *Server) clock() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) newID() string {
	if s.NewID != nil {
		return s.NewID()
	}
	return NewExecutionID()
}

// Encode renders a response as one line of JSON ending in a newline, with
// <, > and & left as they are (output is not HTML).
func Encode(resp *Response) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
