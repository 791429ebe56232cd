package serve

import (
	"bytes"
	"net/http"
)

// answerWriter is the http.ResponseWriter go-sdk's streamable handler gets
// for a POST: it lets go-sdk's flush after an event pass, except after the
// event that carries a JSON-RPC response (the answer to the POST's call),
// the last thing the handler writes before it returns. net/http then sends
// that event and the end of the response in one write, where a flush
// first would cost a second system call and, for a client that stops
// reading at the answer, the connection: the end of the body arriving
// after the client closed it, net/http's client cannot reuse the
// connection. A request, notification or anything this does not recognize
// is flushed at once as before, so an elicitation or progress sent during
// a call is never held. (In a batch of calls, which only the 2025-03-26
// era sends, an answer may wait for the batch's last one.)
type answerWriter struct {
	http.ResponseWriter
	answered bool // the last event written is a response
}

func (w *answerWriter) Write(b []byte) (int, error) {
	w.answered = isAnswerEvent(b)
	return w.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *answerWriter) FlushError() error {
	if w.answered {
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath (deadlines).
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isAnswerEvent reports whether b is one server-sent event as go-sdk writes
// a JSON-RPC response: "event: message", an optional id, and data that
// go-sdk encoded as {"jsonrpc":"2.0","id":ID,"result":… or "error":…}
// (a request has "method" after the id, a notification no id).
func isAnswerEvent(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, []byte("event: message\n"))
	if !ok {
		return false
	}
	if id, ok := bytes.CutPrefix(rest, []byte("id: ")); ok {
		i := bytes.IndexByte(id, '\n')
		if i < 0 {
			return false
		}
		rest = id[i+1:]
	}
	rest, ok = bytes.CutPrefix(rest, []byte(`data: {"jsonrpc":"2.0","id":`))
	if !ok || len(rest) == 0 {
		return false
	}
	// Skip the id: a string (with escapes) or a number.
	if rest[0] == '"' {
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' {
				i++
			}
		}
		if i >= len(rest) {
			return false
		}
		rest = rest[i+1:]
	} else {
		i := bytes.IndexByte(rest, ',')
		if i < 0 {
			return false
		}
		rest = rest[i:]
	}
	return bytes.HasPrefix(rest, []byte(`,"result":`)) || bytes.HasPrefix(rest, []byte(`,"error":`))
}
