// Package audit is the tamper-evident trail of what a confirmation
// ledger did: every question asked, every decision (the in-band answer
// or the approver's identity), redemption, outcome, in-doubt and refused
// replay is one [Record], written by the store in the same atomic step as
// the ledger transition it records (memory: under the store's lock, in a
// JSONL [File], each record synced to disk before its transition takes
// effect; PostgreSQL: in the transition's transaction;
// Redis: in its script), so that there is no transition without its
// record and no record without its transition.
//
// # Format and hash
//
// A record's canonical bytes are one line of JSON with its fields in a
// fixed order and one spelling ([Record.Canonical]): the fields the caller
// knows first ([Record.Prefix]), then those the store decides inside its
// atomic step ([Seal]): seq (1, 2, 3...), time (the store's clock, unix
// microseconds), result (a word) and prev, the SHA-256 of the previous
// record's canonical bytes (zero for the first). A trail is those lines in
// seq order; export writes them as they are. [Verify] names the first
// record edited, deleted, reordered, or the trail truncated below a
// [Checkpoint]: a statement "record seq has SHA-256 head", signed with an
// Ed25519 key (`mcp-confirm keygen --audit`) that whoever administers the
// store need not hold.
//
// # What it guarantees, and what it does not
//
// Given the public key and the checkpoints, a verified trail proves that
// its records up to the last checkpoint are the ones written, in the
// order written, none removed. It does not prove:
//   - anything after the last checkpoint: whoever can write the store can
//     rewrite those records and recompute the chain (checkpoints are
//     signed periodically; keep copies where the store's administrator
//     cannot reach, as the server's log);
//   - that a checkpoint was not deleted along with what it covered, if the
//     verifier has no other copy of it;
//   - that what a record says is true of the world: the in-band answer is
//     what the client relayed (a lying client is, to the trail, the
//     person), the question is what the server sent, an approver is who
//     the approval page authenticated;
//   - that a record's Time is right: it is the store's clock (replicas'
//     clocks may differ; order is seq's).
//
// No secret enters a record: a Record has no field for a requestState, a
// token or a key, and the front ends put only names, digests, the
// question's text and answer words in a [Call].
package audit
