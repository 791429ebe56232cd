// Package proxy puts single-use, honest confirmations in front of an MCP
// server nobody here wrote, with no change to that server.
//
// A [Proxy] is the gate in front of a relay. The relay (internal/relay) is
// a generic MCP forwarder — a go-sdk server for the person's client, go-sdk
// client connections to one upstream server — that passes everything
// through unchanged (tools/list, resources, prompts, completions, logging,
// progress, cancellation, list-changed notifications, and the upstream's
// own elicitation, sampling and roots requests) and knows nothing of
// confirmations; its package doc states what it guarantees about
// forwarding. The gate decides every tools/call round by the [Policy]:
// allowed calls are forwarded as they are, denied tools are hidden from
// tools/list and refused, and every other call is asked.
//
// An asked call runs through [confirm.Flow] behind the [requeststate]
// boundary, in both protocol eras: the first round records a pending
// confirmation in the [ledger] and puts the proxy's own question; the
// answer redeems it, and only then is the call forwarded, once. A tool
// the policy's [[approval]] tables name also needs (mode "both") or
// needs instead (mode "out-of-band") approval by approvers reached
// outside the chat, signed in on the approval page, which the client
// cannot give: package confirm says what that guarantees. The proxy
// refuses to start with approval tables and no approval page
// (Options.Page), or with two tables naming a tool the upstream lists;
// a call of a tool two tables name is refused, and never forwarded
// (TestProxyApprovalTablesOverlap). TestProxyApprovalPerTool checks
// through the proxy, in both eras, that a table's approval applies to
// the tools it names, and to them alone.
//
// # What it guarantees
//
//   - The question is the proxy's. It names the upstream (as the operator
//     named it in the policy), the tool, and every argument as a key, its
//     value's JSON type and the value, each through package prompt: escaped
//     visibly, one line each, isolated for bidi, cut in the middle when
//     long, with the value's size and a short SHA-256 when cut. Only
//     strings stand between « and » (prompt.JSON): false reads
//     "boolean false", "false" reads "string «false»", and an array or
//     object shows its structure (TestProxyStringAndLiteralShownApart). No
//     text from the upstream — tool descriptions, titles, schemas, server
//     name, instructions — goes into it. Arguments it could not show as the
//     upstream will read them (bytes that are not UTF-8, lone surrogates,
//     numbers that readers using IEEE-754 doubles read as other numbers,
//     such as 9007199254740993 or 1e400, anything but an object) are
//     refused before asking, saying where and, for a number, what such a
//     reader gets (TestProxyInexactNumberRefused; the rule is prompt's).
//   - Checked against the tool's input schema. Before asking, the arguments
//     are validated against the input schema the upstream lists for the
//     tool, with github.com/google/jsonschema-go (go-sdk's validator; draft
//     2020-12 and draft-07, no remote $ref fetched). A value of a JSON type
//     the schema does not allow is refused naming its place and the types
//     wanted; any other mismatch, and a schema in another draft or that does
//     not resolve, are refused too; nothing is asked, issued or forwarded
//     (TestProxySchemaTypeMismatchRefused). The schema is the upstream's
//     own: one that allows anything checks nothing.
//   - Binding. The sealed requestState binds the tool, the digest of the
//     exact canonical arguments, the principal, the audience and the
//     fingerprint of the upstream's tool definition ([Fingerprint]: name,
//     input schema, annotations) taken when asking; the ledger record it
//     names binds the same tool, digest, principal and fingerprint. Before
//     forwarding, the proxy checks the tool's definition as the upstream
//     lists it now, and forwards only if its fingerprint equals both. From
//     an upstream that does not declare tools.listChanged, that is one
//     read of its tool list per confirmed call; from one that does, it is
//     the list the proxy read last, as long as the upstream has announced
//     no change since (a mismatch reads it again) and no read of its tools
//     — the proxy's own, or a client's tools/list passing through — has
//     caught it changing a tool it had listed without announcing it. Once
//     caught, it is read before every confirmed call, as one that does
//     not declare tools.listChanged (TestProxyUnannouncedChangeRefused:
//     a change shown by another client's tools/list is refused, and so is
//     a later one no read has shown; nothing is forwarded). The question itself
//     may be asked about the definition read last, however old: if the
//     upstream changed it since, the check refuses, and the next question
//     is asked about the new one. It forwards exactly the canonical
//     arguments the digest covers.
//   - Unknown tools. A call of a tool the upstream does not list, read
//     when asking, is refused as unknown before anything is asked, issued
//     or forwarded. An allowed call is forwarded as it is: the upstream
//     answers for a name it does not know.
//   - At most once. The approval is redeemed before the call is forwarded,
//     and a call is forwarded once, never retried. If the upstream's reply is
//     lost after forwarding, the answer says the outcome is unknown. With a
//     shared Redis or PostgreSQL store, replicas share this guarantee. When
//     an upstream of the 2026-07-28 era asks a follow-up question inside an
//     approved call, the round that carries the answer is itself a
//     single-use record. TestFrontEndSuite runs the contract every
//     confirming front end keeps (package confirmtest: spent twice,
//     replay, racers, lost reply, crash, replicas, principal, declined,
//     no elicitation, expired) against the proxy, counting the calls the
//     upstream received.
//
// # What it cannot guarantee
//
//   - It does not understand the resource a tool acts on, so it cannot
//     re-check it (as internal/filetool re-checks a file's identity): between
//     the question and the call, the file, row or ticket named in the
//     arguments may change. What is bound instead is the exact arguments and
//     the tool's definition, as the upstream describes it.
//   - It cannot make an upstream honest. The upstream acts; a malicious
//     upstream can do anything with any call it receives, change a tool's
//     behaviour without changing its definition, or change the definition
//     between the re-check and the call. Annotations are the upstream's
//     claims: readOnlyHint is trusted only when the operator allows it.
//     An upstream that declares tools.listChanged is taken at its word
//     until a read shows otherwise. MCP has no read of one tool's
//     definition, only of the whole list (62 ms and 46 MB for 1,002 tools
//     through go-sdk), so the check does not read it for every call: a
//     change the upstream makes without announcing it, before any read has
//     caught it once, or announces only after the answer arrived (go-sdk
//     servers announce 10 ms after the change), is not seen, and the
//     approved call is forwarded (the control of
//     TestProxyUnannouncedChangeRefused). An honest upstream whose late
//     announcement a read overtakes is taken for a silent one: its calls
//     cost a read each from then on, which costs time, not safety.
//   - A lying client is indistinguishable from the person (the client relays
//     the answer).
//   - At most once, not exactly once: a proxy that crashes between redeeming
//     an approval and forwarding loses the call.
//
// # Connections
//
// Options.Connect is called once at start-up (the policy is checked
// against the tools the upstream lists then) and once more for each
// downstream session of an older protocol era whose client declared
// elicitation, sampling or roots, which gets an upstream connection of its
// own so that the upstream's requests of those kinds reach exactly that
// client. 2026-07-28 requests and older-era clients that declared none of
// them share the first. At most Options.MaxSessions sessions hold a
// connection of their own at once. The relay's package doc says how
// connections are shared, closed and opened again. Sharing a connection
// changes nothing of the gate: each call is decided on its own state,
// principal and session.
//
// # Policy format
//
// The policy is TOML ([ParsePolicy]), decoded by github.com/BurntSushi/toml:
// Go operators already write it (containerd, Hugo and golangci-lint
// read it), it has comments, and it has no implicit typing — YAML reads
// no as false and 010 as 8, and JSON has no comments. Unknown keys are
// errors, so a misspelt deny list cannot be silently ignored.
package proxy
