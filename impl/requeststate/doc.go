// Package requeststate seals the requestState of MCP multi round-trip
// requests (protocol 2026-07-28) and verifies every echo, as a go-sdk
// receiving middleware.
//
// go-sdk's mcp/protocol.go says of CallToolResult.RequestState:
// "Unauthenticated servers must encrypt, sign and verify this value." The SDK
// itself does neither; this package is that boundary. Install it with
//
//	b, err := requeststate.New(requeststate.Options{Audience: "my-server"})
//	server.AddReceivingMiddleware(b.Middleware())
//
// It acts on tools/call, prompts/get and resources/read only. Outbound, an
// input_required result's RequestState (plaintext written by the handler) is
// replaced by a token: AES-256-GCM over claims naming the method, the target
// (tool or prompt name, resource URI), a digest of the canonical arguments
// ([ArgumentsDigest]), the audience, a salted keyed hash of the principal, the
// issue time and an expiry (TTL, re-sealed with fresh times every round).
// Inbound, a requestState is opened and every claim is checked against the
// request it arrived on before the handler runs; the handler then sees its own
// plaintext and [BindingFrom] reports Verified. Any failure of a call that
// carries a requestState, whatever its cause, answers with one frozen
// JSON-RPC error ([Rejection]: -32602 "Invalid or expired requestState",
// data {"reason":"invalid_request_state"}); the real reason goes to the
// server log at Warn level, never the token. A first round (no
// requestState) whose arguments [CanonicalArguments] refuses is told what
// is wrong instead, as -32602 "Invalid arguments: …" ([ArgumentsMessage]),
// a duplicated key named and escaped by package prompt
// (TestAttackDuplicateArgumentKeys): with no token, no reason of a token's
// can leak.
//
// What it guarantees, for a Boundary whose keys are secret:
//   - confidentiality: clients cannot read the handler's state;
//   - integrity: a handler never receives a requestState it did not write;
//   - binding: a token is accepted only on the same method, target,
//     canonical arguments, audience and principal it was sealed for;
//   - freshness: a token is refused after its TTL and when its issue time
//     lies more than MaxSkew in the future;
//   - one wire error: clients cannot tell one failure cause of a call
//     carrying a requestState from another;
//   - no way around the checks: the package exports no function that seals
//     or opens a token outside the middleware, so every token it mints is
//     bound to the call it answered and every token it accepts has passed
//     every check above. (The token format lives in an internal package of
//     this module, for its tests and fuzz targets.)
//
// What it does NOT guarantee:
//   - single use. Within its TTL a token can be replayed by the same
//     principal against the same target and arguments, and it is accepted
//     every time; at-most-once is the job of impl/ledger, keyed on an id kept
//     inside the sealed state.
//   - that InputResponses are genuine. They travel beside the token, not in
//     it; a handler must check its own state (and [Binding.Verified]) before
//     trusting an answer.
//   - survival. With no Keys, the key is random and held only by this
//     process: tokens die with a restart and are refused by other replicas.
//     Share keys (Options.Keys; the mcp-confirm binary reads them from a
//     key file) across replicas that must accept each other's tokens.
//   - anything against a holder of the keys. Whoever holds a secret can
//     seal any claims under it, as the middleware does; the keys are the
//     capability, and an Audience only separates services that share them.
//   - distinct principals when the transport has none: every
//     unauthenticated caller has principal "", so on an unauthenticated
//     server the token itself is the only capability.
//
// In the older protocol era (clients before 2026-07-28) go-sdk's own shim,
// installed by mcp.NewServer inside every later middleware, fulfils input
// requests in-process and re-invokes the handler; that plaintext never leaves
// the process and never passes this boundary. A requestState a client puts
// on the wire is verified in both eras. When the shim's in-process question
// fails, it ends the call without calling the handler again; a handler that
// recorded something in the first round learns of it through [AfterCall].
package requeststate
