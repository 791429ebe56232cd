package redisledger

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// stamped returns the script of body, a Lua chunk that reads nkeys keys
// and decides on now, the server's clock in unix microseconds, read once
// before it runs: one atomic step, one instant. Run with one key more, the
// store's trace counter (see [Options.Observe]), it also draws the step's
// sequence number from the counter and replies {sequence number, now,
// body's reply}; an error reply stays as it is.
func stamped(nkeys int, body string) *redis.Script {
	return redis.NewScript(auditLua + expiryLua + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function step()
` + body + `
end
local reply = step()
if #KEYS > ` + strconv.Itoa(nkeys) + ` and not (type(reply) == 'table' and reply.err) then
  return {redis.call('INCR', KEYS[` + strconv.Itoa(nkeys+1) + `]), now, reply}
end
return reply
`)
}

// readScript reads a confirmation's entry, for Decide to check the
// approver against. KEYS: entry. Returns the entry, or nil.
var readScript = stamped(1, `return redis.call('GET', KEYS[1])`)

// A stamp is what a script run for an observed store reports of its step:
// the sequence number it drew, and the server's clock it decided on.
type stamp struct {
	seq uint64
	at  time.Time
}

// event returns e as of the step st stamps.
func (st stamp) event(e ledger.Event) ledger.Event {
	e.Seq = st.seq
	return e
}

// call runs script on keys with args as run does and, for an observed
// store, with the trace counter as one key more: it then sets *st from the
// reply and returns the script's own reply, a nil one as [redis.Nil].
func (s *Store) call(ctx context.Context, st *stamp, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if s.observe == nil {
		return s.run(ctx, script, keys, args...)
	}
	return unstamp(s.run(ctx, script, append(keys[:len(keys):len(keys)], s.traceKey), args...), st)
}

// read runs readScript on entry, as call does but without WAIT: it
// writes nothing but the trace counter.
func (s *Store) read(ctx context.Context, st *stamp, entry string) *redis.Cmd {
	if s.observe == nil {
		return readScript.Run(ctx, s.client, []string{entry})
	}
	return unstamp(readScript.Run(ctx, s.client, []string{entry, s.traceKey}), st)
}

// unstamp sets *st from the stamped reply of cmd, and leaves the script's
// own reply in cmd, a nil one as [redis.Nil].
func unstamp(cmd *redis.Cmd, st *stamp) *redis.Cmd {
	if cmd.Err() != nil {
		return cmd
	}
	v, ok := cmd.Val().([]any)
	if !ok || len(v) != 3 {
		cmd.SetErr(fmt.Errorf("%w: stamped reply %v", errCorrupt, cmd.Val()))
		return cmd
	}
	seq, ok1 := v[0].(int64)
	us, ok2 := v[1].(int64)
	if !ok1 || !ok2 || seq <= 0 {
		cmd.SetErr(fmt.Errorf("%w: stamp %v %v", errCorrupt, v[0], v[1]))
		return cmd
	}
	*st = stamp{seq: uint64(seq), at: time.UnixMicro(us).UTC()}
	if v[2] == nil {
		cmd.SetVal(nil)
		cmd.SetErr(redis.Nil)
	} else {
		cmd.SetVal(v[2])
	}
	return cmd
}
