// Package execapi is art's JSON exec API: the ExecutionRequest and
// ExecutionResponse documents (api_version 1), their strict decoding and
// validation, the table of error codes, and the engine that runs a request
// as a process and answers it.
//
// The pieces, in the order a request meets them:
//
//   - Decode parses one request strictly: field names exactly as in
//     docs/schema/exec-request.v1.json, no unknown fields, nothing after
//     the value.
//   - Policy.Validate applies the documented rules (argv, NUL bytes,
//     environment keys, limits, bind mounts) and the caller's list of
//     protected host paths (the store, art's state).
//   - An Executor runs it. Runner is the engine: it takes a PrepareFunc
//     that turns a request into an *exec.Cmd (ProcessCommand for a plain
//     host process; art's sandbox for real use) and owns stdin, capture,
//     timeout, killing the process tree, rusage and the status mapping.
//   - Server.Serve reads one request or a JSONL stream and writes the
//     responses in request order.
//
// Invariants: a request that fails decoding or validation never reaches
// an Executor; every answer is a Response (an error is a Response with
// status "error" and an error object, exit_code -1 when nothing ran);
// output beyond the limit is dropped and flagged, never an error; when the
// command exits, timeouts or is cancelled, nothing of its process group
// survives the response.
//
// The package imports no other art package but internal/errclass (the
// error classes CodeOf maps): the store side (snapshots,
// changes, ops rows) is added by the executor art wires in cmd/art.
package execapi
