// Package serve runs an MCP server (any [mcp.Server]) on the two transports
// mcp-confirm offers, with the limits a server exposed to other local users
// or to a network needs: streamable HTTP for both protocol eras from one
// address ([NewHTTP]), and stdio that survives malformed lines ([Stdio]).
//
// # What it guarantees
//
// Over HTTP, every limit has a safe default ([HTTPOptions]; zero means the
// default, negative is refused):
//   - a request body over MaxMessageBytes gets 413 and is not read further
//     (go-sdk's own limit, StreamableHTTPOptions.MaxRequestBodyBytes);
//   - a stateful (older-era) session idle for SessionTimeout is closed and
//     its memory released (go-sdk's StreamableHTTPOptions.SessionTimeout,
//     which pauses while a request of the session is in flight, so a
//     question waiting for its answer keeps its session);
//   - at most MaxSessions stateful sessions live at once: an initialize
//     beyond that gets 503 and a JSON-RPC error, and creates nothing;
//   - each request, stream or not, ends after RequestTimeout: its context
//     is cancelled and its connection's write deadline passes (a deadline
//     per request, not the server-wide WriteTimeout, which would cut every
//     long stream at the same age);
//   - headers must arrive within ReadHeaderTimeout, the whole request within
//     ReadTimeout, and an idle keep-alive connection is closed after
//     IdleTimeout, so slow or silent connections do not hold file
//     descriptors; at most MaxConns connections are open at once (more wait
//     in the kernel's accept queue until one closes).
//
// Requests are routed by their Mcp-Protocol-Version header: 2026-07-28 and
// later to go-sdk's stateless handler (multi round-trip requests), anything
// else, including the header-less initialize of older clients, to its
// stateful handler (which can elicit in-process). go-sdk v1.8.0's stateful
// handler refuses 2026-07-28, and its stateless one cannot elicit for older
// clients, hence one of each. HTTPOptions.Auth wraps both: authentication
// runs before any session is looked up or created.
//
// The event that answers a POST's call and the end of its response leave
// in one write, where go-sdk alone flushes the answer and ends the response
// in a second: one system call fewer per call, and a client that closes
// the body once it has the answer keeps its connection
// (TestHTTPAnswerEndsResponse, its control go-sdk's handler alone). Every
// other event (an elicitation, progress, a log message during a call) is
// flushed as go-sdk writes it (TestIsAnswerEvent).
//
// [ServerLogger] is the logger to build the served mcp.Server with: go-sdk
// logs each server session's start and end at Info, and each 2026-07-28
// request over HTTP is a session of its own, so it lowers go-sdk's Info
// records to Debug; warnings and errors pass unchanged
// (TestServerLoggerQuietPerRequest, its control the logger itself;
// TestServerLoggerLevels).
//
// Over stdio, every line is checked before go-sdk sees it, because go-sdk
// v1.8.0 ends the whole session on the first line it cannot decode. A line
// that is not JSON gets a -32700 error, one that is JSON but not a JSON-RPC
// 2.0 message (a wrong or missing "jsonrpc", a batch, a bad id) a -32600
// error, and one longer than MaxMessageBytes a -32600 error without being
// buffered; all with id null, as JSON-RPC 2.0 prescribes when the id cannot
// be trusted. The next line is served as usual.
//
// # What it does not guarantee
//
// Fairness between clients: the caps are global, so one client (or, without
// Auth, anyone who can reach the address) can use all the sessions or
// connections, and others wait or are refused until the timeouts reclaim
// them. Put a proxy with per-client limits in front of a server exposed to
// many. Stdio is one client by construction and has no session limits; a
// read of stdin cannot be interrupted, so the goroutine reading it ends only
// at end of input (or with the process).
package serve
