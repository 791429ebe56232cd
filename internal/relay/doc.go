// Package relay forwards MCP between downstream clients and one upstream
// server that nobody here wrote: a go-sdk server for the clients
// ([Relay.Server]) and go-sdk client connections to the upstream, one
// shared and one per older-era session whose client can answer the
// upstream's own requests.
//
// It knows nothing of confirmations. Whoever assembles it (package proxy,
// the gate) decides each tools/call round ([Options.CallTool], which
// forwards through the [Upstream] it is handed), which tools tools/list
// shows ([Options.Listed]), and what runs before the relay on every
// request ([Options.Receiving]: the requestState boundary).
//
// # What it guarantees
//
// Each guarantee names the tests that check it; those in impl/proxy run
// the relay behind the gate.
//
//   - Pass-through. tools/list, resources (list, templates, read,
//     subscribe, updates), prompts, completions, logging, progress,
//     cancellation, list-changed notifications and the upstream's own
//     elicitation, sampling and roots requests pass through unchanged but
//     for the protocol's own _meta keys, which describe each hop and are
//     written afresh on each. The relay answers initialize, ping and the
//     protocol's session methods itself; methods outside the MCP
//     specification are not forwarded (go-sdk does not decode them) and get
//     "method not found". The upstream's own protocol _meta keys reach no
//     client, on any method (TestRelayDropsUpstreamProtocolMeta).
//     TestRelayPassThroughFeatures,
//     TestRelayNotificationsAndSampling, TestRelayCancellation,
//     TestRelayResourceUpdates, TestRelayUnknownMethod.
//   - The right client. The upstream's elicitation, sampling and roots
//     requests reach only the older-era client whose connection they came
//     on, on the stream of a call that client is waiting on; progress
//     reaches only the caller, under its own token (the relay rewrites
//     tokens so that clients' choices never collide upstream), and a
//     result only its caller, also when sessions share a connection; log
//     messages on the shared connection reach no one; a resource
//     subscription shared on one connection is sent upstream once,
//     outlives a subscriber that leaves and ends upstream when the last
//     one leaves (go-sdk tells of a 2026-07-28 client's leaving with a
//     cancelled context; the unsubscribe is sent regardless).
//     TestProxyRelaysUpstreamQuestion,
//     TestRelayNotificationsAndSampling, TestRelaySharedConnectionIsolation,
//     TestRelaySubscriptionsShared.
//   - Both eras. A 2026-07-28 client gets every tools/call, prompts/get and
//     resources/read result marked with its resultType, which go-sdk writes
//     only for its own handlers; an older-era client gets an
//     input_required result played in-process (its requests put to the
//     client, the call made again with the answers, at most maxRounds
//     rounds; an input_required result that asks nothing is "busy, retry
//     later"), as go-sdk's own shim does for its own tools.
//     TestProxyResultTypeOnTheWire, TestProxyRelaysUpstreamQuestion,
//     TestRelayRoundsBounded.
//   - Sent once. A request is forwarded once and never retried; a
//     connection the upstream ended is opened again for the next request.
//     A request whose connection failed under it is told only "the
//     upstream server did not answer", nothing of the failure's words.
//     TestProxyLostReplyOutcomeUnknown, TestRelayUpstreamFailureSaysOnlyThat.
//   - Definitions as fresh as asked. Each connection keeps the last
//     complete list of tools it read. [Upstream.Tool] answers from it only
//     as its [Freshness] allows: [Current] only if the upstream declared
//     tools.listChanged and has announced no change since the list was
//     read (an announcement on any connection empties every connection's
//     list before it is relayed downstream), and no read has caught it
//     changing a tool without announcing it ([Relay.Unannounced]: every
//     read, the relay's own and a downstream client's tools/list passing
//     through, refreshes the list and is compared with it; one that
//     catches such a change empties every connection's list); otherwise, and
//     for [Fresh] and [Upstream.Tools], it reads every page of the
//     upstream's list.
//     The go-sdk client's own tools/list cache hint is cleared before that
//     cache sees it. TestProxyToolRedefinedAfterQuestion,
//     TestProxyDefinitionReads, TestProxyListChangedRefreshes,
//     TestProxyUnannouncedChangeRefused, TestRelayToolFreshness,
//     TestRelayToolChangeForgetsEveryConnection.
//   - Bounded. At most Options.MaxSessions older-era sessions hold a
//     connection of their own (for a command upstream, a process each); a
//     session refused because its connection could not be opened gives
//     its place back. TestProxySessionCap,
//     TestRelaySessionSlotFreedAfterFailedDial.
//   - Questions it can check. An upstream's question (elicitation/create,
//     or an input request it plays for an older-era client) whose
//     requested schema go-sdk could not validate an answer against (see
//     internal/schemabound: a loop would end the process for a stack
//     overflow, a schema doubling its work at each level of an answer's
//     nested lists would spin a CPU for years) is refused, and the client
//     is never asked.
//     TestRelayUpstreamQuestionSchemaLoopRefused.
//   - Private by default. A list or read result the upstream did not scope
//     for caching is scoped "private": a shared cache must not serve one
//     user's answer to another. TestProxyFilesystemServer.
//   - Early notifications. A list change the upstream announces while New
//     is still connecting is announced downstream once the server exists;
//     a resource update from then is dropped (no client can have
//     subscribed). TestProxyListChangedDuringStart.
//   - Malformed upstream messages. A request or notification the upstream
//     sends without the params its handling reads is refused (invalid
//     params) or dropped, and a result with a null input request (go-sdk
//     v1.8.0's decoder dereferences both) becomes a JSON-RPC error before
//     go-sdk decodes it, over stdio and streamable HTTP (JSON bodies and
//     event streams; an event is held up to go-sdk's bound on one event,
//     TestGuardEventsBound). TestRelayUpstreamMissingParams,
//     TestRelayMalformedUpstreamResult; FuzzProxyMessages drives the proxy
//     with random JSON-RPC from the client and the upstream.
//   - Close ends what is in flight. Requests waiting on the upstream are
//     cancelled when Close is called, so an upstream that never answers
//     cannot keep Close from returning. TestRelayCloseWithCallInFlight.
//   - The seam: Options.Receiving runs before the relay, Options.Listed
//     decides tools/list, and Options.CallTool sees every tools/call round;
//     a round it does not forward never reaches the upstream.
//     TestRelayGateHooks.
//
// # What it does not guarantee
//
//   - No security decision of its own: every tools/call goes to
//     Options.CallTool, or upstream unchanged when that is nil.
//   - Progress is relayed best effort, for progressGrace after the call
//     returns; log messages reach only older-era clients that hold a
//     connection of their own.
//   - An older-era upstream's server-initiated request on the shared
//     connection (one a 2026-07-28 client cannot receive) is refused, and
//     the call that caused it fails.
//   - An upstream that declares tools.listChanged is trusted to announce
//     every change until a read shows otherwise: one it makes without a
//     word before any read has shown one, or announces only later (go-sdk
//     servers announce 10 ms after a change), and an announcement lost on
//     the way, leave [Current] answering from the old list until the next
//     announcement or read.
//
// # Connections
//
// [New] opens one upstream connection. Requests of the 2026-07-28 era —
// whose clients cannot receive server-initiated requests — share it, and so
// do the sessions of older-era clients that declared no elicitation,
// sampling or roots capability; it declares none of them, and an upstream
// of the 2026-07-28 era asks through input_required results, which are
// relayed in-band to the call's own client. A session of an older era
// whose client declared one of them gets a connection of its own when it
// initializes (for a command upstream, a process of its own), declaring
// those capabilities, so the upstream's elicitation, sampling and roots
// requests reach exactly that client; it closes when the session ends. An
// initialize beyond Options.MaxSessions such sessions is refused until one
// ends. A session on the shared connection releases the resource
// subscriptions it still holds when it ends
// (TestRelaySharedSessionReleasesSubscriptions).
//
// On each connection but go-sdk's streamable and SSE client ones, the
// relay sends tools/call itself beside the go-sdk client session, under ids
// go-sdk never uses, writes its params with the arguments' bytes as they
// are (one JSON value, or the call is not sent: TestAppendCall), and reads
// a text result by a scan of its bytes, keys matched exactly as go-sdk
// matches them, rather than by go-sdk's decoder and its 32 KiB buffer per
// decode (TestDecodeResultAsGoSDK: the same result either way, and
// anything else is go-sdk's to decode); everything else on the connection
// is go-sdk's. On a command's connection
// (mcp.CommandTransport, started and stopped as go-sdk does) or another
// newline-delimited one (mcp.IOTransport), the relay reads the messages
// itself: go-sdk decodes each once where its own connection decodes it
// twice, and the answers to the relay's own calls are read by a scan of
// the bytes the framing decoder validated (TestRelayAnswerMembers) and go
// to their callers from the reading goroutine, guarded as above (TestLinesReadAsGoSDK: the same messages and the same failures as
// go-sdk's IOTransport, the bound on a message's length included;
// TestLinesRelayAnswers, TestLinesLimitPerAnswer). One difference: a batch of
// requests from an upstream of the 2025-03-26 era is answered message by
// message, not in one batch.
package relay
