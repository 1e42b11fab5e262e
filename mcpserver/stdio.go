package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxLineBytes bounds one inbound JSON-RPC message (one line).
const MaxLineBytes = mcp.DefaultMaxLineLength

// NewStdioTransport serves MCP over newline-delimited JSON on r and w, as
// mcp.IOTransport does, but a client's bad input never ends the server:
// the SDK's transport stops at the first line that is not a JSON-RPC
// message (and at end of input drops the replies it still owes). Here
// every line is checked before the SDK sees it:
//
//   - not JSON: a -32700 parse error (id null);
//   - JSON but not a JSON-RPC message, a batch (MCP 2025-06-18 has
//     none; the SDK would end the connection over one) or a line over
//     MaxLineBytes: a -32600 invalid request, with the request's id
//     when it has a usable one;
//
// and the server reads on. An error reply is written only after the
// replies owed to every request read before the bad line, and at end of
// input the server ends only once every request read has been answered.
func NewStdioTransport(r io.Reader, w io.Writer) mcp.Transport {
	g := &lineGate{in: bufio.NewReaderSize(r, 64<<10), w: w, owed: map[jsonrpc.ID]int64{}}
	g.cond = sync.NewCond(&g.mu)
	return &mcp.IOTransport{Reader: g, Writer: gateWriter{g}, MaxLineLength: -1}
}

// lineGate is the transport's reader (what the SDK decodes) and, through
// gateWriter, its writer. Lock order: mu only.
type lineGate struct {
	in  *bufio.Reader // read only by the SDK's reading goroutine
	buf []byte        // the checked line (with its newline) being handed out

	mu     sync.Mutex
	cond   *sync.Cond // signalled when owed shrinks or the gate closes
	w      io.Writer
	read   int64                // requests read so far
	owed   map[jsonrpc.ID]int64 // requests passed on and not yet answered -> their number
	errs   []pendingError       // error replies waiting for earlier replies
	closed bool
	werr   error // the first write error: nothing more can reach the client
}

type pendingError struct {
	after int64 // write once no request numbered below this is owed
	line  []byte
}

// Read hands the SDK the next line that is a JSON-RPC message.
func (g *lineGate) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		line, err := g.readLine()
		if len(line) > 0 {
			g.check(line)
		} else if err == nil {
			continue
		}
		if err != nil && len(g.buf) == 0 {
			g.drain()
			return 0, err
		}
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

// readLine returns the next line without its newline and surrounding
// blanks; a line over MaxLineBytes is skipped with an error reply.
func (g *lineGate) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := g.in.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLineBytes {
			for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of it
				_, err = g.in.ReadSlice('\n')
			}
			g.fail(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: a message longer than %d bytes", MaxLineBytes))
			line = nil
			if err != nil {
				return nil, err
			}
			return nil, nil
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSpace(line), err
	}
}

// check passes a JSON-RPC message on to the SDK (a request is owed a
// reply) or queues the error reply for a line that is not one.
func (g *lineGate) check(line []byte) {
	if !json.Valid(line) {
		g.fail(nil, jsonrpc.CodeParseError, "Parse error: not JSON")
		return
	}
	if line[0] == '[' {
		g.fail(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: JSON-RPC batches are not supported (MCP 2025-06-18 has none); send one message per line")
		return
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		g.fail(line, jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
		return
	}
	if req, ok := msg.(*jsonrpc.Request); ok {
		g.mu.Lock()
		switch {
		case req.IsCall():
			g.read++
			g.owed[req.ID] = g.read
		case req.Method == "notifications/cancelled":
			// A cancelled request may go unanswered (MCP): owe it no more.
			var p struct{ RequestID any }
			if json.Unmarshal(req.Params, &p) == nil {
				if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
					delete(g.owed, id)
					g.flushLocked()
					g.cond.Broadcast()
				}
			}
		}
		g.mu.Unlock()
	}
	g.buf = append(append(g.buf[:0], line...), '\n')
}

// fail queues an error reply to line (nil: id null) behind the replies
// owed to the requests read so far.
func (g *lineGate) fail(line []byte, code int64, msg string) {
	reply := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", requestID(line), jsonrpc.Error{Code: code, Message: msg}}
	data, err := json.Marshal(reply)
	if err != nil {
		panic(err) // plain strings and numbers always marshal
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, pendingError{after: g.read + 1, line: append(data, '\n')})
	g.flushLocked()
}

// requestID is the id of an invalid request when it is a usable one (a
// string or a number), else null.
func requestID(line []byte) json.RawMessage {
	var m struct{ ID json.RawMessage }
	if line == nil || json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return json.RawMessage("null")
	}
	var v any
	if json.Unmarshal(m.ID, &v) == nil {
		switch v.(type) {
		case string, float64:
			return m.ID
		}
	}
	return json.RawMessage("null")
}

// flushLocked writes the queued error replies whose earlier requests are
// all answered, in order.
func (g *lineGate) flushLocked() {
	for len(g.errs) > 0 {
		e := g.errs[0]
		for _, n := range g.owed {
			if n < e.after {
				return
			}
		}
		g.writeLocked(e.line)
		g.errs = g.errs[1:]
	}
}

func (g *lineGate) writeLocked(p []byte) {
	if g.werr != nil {
		return
	}
	if _, err := g.w.Write(p); err != nil {
		g.werr = err
	}
}

// drain waits, at the end of input, until every request read has been
// answered and every error reply written (or the transport is closed).
func (g *lineGate) drain() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for (len(g.owed) > 0 || len(g.errs) > 0) && !g.closed && g.werr == nil {
		g.cond.Wait()
	}
}

// Close ends a drain: the server is going away.
func (g *lineGate) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cond.Broadcast()
	return nil
}

// gateWriter writes the SDK's messages (one per call, newline included)
// and marks the requests they answer as answered.
type gateWriter struct{ g *lineGate }

func (w gateWriter) Write(p []byte) (int, error) {
	g := w.g
	msg, _ := jsonrpc.DecodeMessage(bytes.TrimSpace(p))
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writeLocked(p)
	if g.werr != nil {
		g.cond.Broadcast()
		return 0, g.werr
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		if _, owed := g.owed[resp.ID]; owed {
			delete(g.owed, resp.ID)
			g.flushLocked()
			g.cond.Broadcast()
		}
	}
	return len(p), nil
}

func (gateWriter) Close() error { return nil }
