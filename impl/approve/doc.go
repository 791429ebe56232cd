// Package approve serves the approval page: where an approver reached
// outside the chat, signed in on their own, sees a confirmation's
// question and approves or declines it, out of band ([ledger.Ledger.Decide]).
//
// A [Handler] is mounted by the front door under its own path
// ([Handler.Prefix]: the public URL's path followed by /approve/), beside
// the MCP endpoint. [Handler.Link] gives the page of a confirmation
// issued with an [ledger.Approval], to send to the approvers (a URL
// elicitation, a notification). On that link:
//
//   - GET, signed in as an eligible approver, shows the question (the
//     Approval's Question, as package prompt wrote it), the deadline, the
//     decisions so far, and, while a decision can be recorded, a form with
//     Approve and Decline. Signed out, it shows a sign-in link and nothing
//     of the request; signed in as someone the Approval does not list, or
//     as its Requester, it says so and shows nothing of the request.
//     Arriving from another site's link (a chat, a mail), whose navigation
//     carries no SameSite=Strict cookie, it reloads itself once from its
//     own site (TestApproveLinkFromAnotherSite).
//   - POST records the decision with [ledger.Ledger.Decide], and shows
//     the page again; a late or second decision is answered on the page
//     with what was recorded (409, or 410 once expired), and changes
//     nothing.
//   - /signin starts the sign-in; callback ends it.
//
// # Sign-in
//
// Approvers sign in with OpenID Connect at the configured issuer ([OIDC]):
// the authorization code flow with PKCE (S256), a state that binds the
// issuer's answer to the browser that asked (login CSRF), and a nonce
// that binds the ID token to the sign-in (replay). The ID token is
// verified (signature by the issuer's published keys, issuer, audience,
// expiry, azp when several audiences) and names the approver:
// [SubjectPrefix] + its subject, in the groups [GroupPrefix] + each value
// of the configured group claim. [ledger.Approval.Approvers] lists these
// names; [ledger.Approval.Requester] must use the same naming to exclude
// the requester. The session is a cookie sealed with AES-256-GCM under a
// key derived from [Options.Key], for [Options.SessionTTL].
//
// Or, with [Options.Passkeys], approvers sign in with a passkey: WebAuthn
// (github.com/go-webauthn/webauthn), a discoverable credential with user
// verification required, enrolled through a one-time link that
// [EnrolLink] makes (`mcp-confirm approvers add` prints it) for a
// [Holder], and kept in Passkeys.File. A passkey is enrolled either for
// the principal its holder's own MCP calls carry, P: signed in with it
// they are [SubjectPrefix] + P, in the group [PasskeyPrefix] + its name,
// so that approvers may list it by either name and the requester of a
// call (named SubjectPrefix + the caller's principal) is refused whether
// they sign in at the issuer or with a passkey (TestApproveSelfApprovalRefused);
// or for a holder who makes no MCP calls: they are PasskeyPrefix + its
// name. A passkeys file holding a passkey that says neither stops New
// (TestPasskeysNamingNoHolderRefused), and such a line added later signs
// no one in. The passkey ceremonies are the one place the page runs a
// script: its own, served at the prefix's passkey.js, the only script its
// CSP allows, fetching from this origin only.
//
// The handler never reads the Authorization header: the MCP caller's
// bearer token, which a prompt-injected agent holds, is not a sign-in,
// and a request that carries only it is treated as signed out.
//
// # What it guarantees
//
//   - A decision is recorded only for an approver signed in at the issuer
//     or with a passkey in this browser, whom the Approval lists and who
//     is not its Requester (by either sign-in), once (the ledger's Decide is one atomic step in the
//     store), before the confirmation expires.
//   - Cross-site request forgery is refused three times over: the session
//     cookie is SameSite=Strict and HttpOnly (Secure, with a __Host- name,
//     when the public URL is https); a POST must carry an Origin equal to
//     the public URL's origin (and a Sec-Fetch-Site, when sent, of
//     same-origin); and a form token, an HMAC of the session's random id
//     and the link, must match.
//   - No page may frame it (Content-Security-Policy frame-ancestors
//     'none', X-Frame-Options DENY). It runs no script and loads nothing:
//     its CSP is default-src 'none', with its one inline style allowed by
//     its hash. Responses are not cached (no-store), and the link in its
//     URL goes in no Referer to another origin (Referrer-Policy
//     same-origin; no-referrer would make Chromium send the page's own
//     form with Origin: null).
//   - The question is shown as the person asked in band would see it:
//     HTML-escaped by html/template, each value that package prompt
//     isolated (FSI, LRI or RLI ... PDI) in its own <bdi> element, so its
//     escapes and hidden-character notes are visible text and no
//     right-to-left name reorders its neighbours; a bidi control prompt
//     never writes raw (an override, an embedding, a mark, an unmatched
//     PDI) is shown as an escape, never obeyed. The page's text is the
//     question less its isolate characters.
//   - A link is the confirmation's ledger id encrypted with AES-256 (one
//     block) and a 128-bit HMAC tag: it does not show the id (which is in
//     logs and requestStates), and a link to any confirmation cannot be
//     made without the key. Links and sessions work on any replica with
//     the same Key and store: the handler keeps nothing between requests.
//
// TestApproveInChromium drives the whole way in a real Chromium against a
// real OpenID Connect provider, TestApprovePasskeyInChromium with a
// passkey of Chromium's virtual authenticator; docs/guarantees.md names the attack tests
// (TestApproveCallerTokenCannotApprove, TestApproveCrossSiteRefused,
// TestApprovePageNotFramable, TestApprovePageHonest and the rest).
//
// # What it does not guarantee
//
//   - That the approver is who the issuer says: whoever can sign in at
//     the issuer as a listed approver (or a member of a listed group)
//     decides. Nor that an approver read the question.
//   - Secrecy of the link: it is sent to the MCP client, which the agent
//     drives. Knowing it lets one see that a request exists, not its
//     question (approvers only) or decide it.
//   - Sign-out or revocation: a session lasts its SessionTTL, even if the
//     issuer disables the account meanwhile. Groups are those of the ID
//     token at sign-in, and a session too large for a cookie (about a
//     hundred long group names) is refused.
//   - For passkeys: that the passkeys file is honest (whoever can write
//     it adds a passkey; the page refuses it if group or others may
//     write it); that an enrolment link reaches only its person (whoever
//     opens it first enrols, once); clone detection (signature counters
//     are not updated); removal (delete the passkey's line from the file).
//     That a passkey's holder is the principal it was enrolled for: the
//     operator says so (`approvers add --principal`), and a holder
//     enrolled as not a caller (--not-a-caller) who does make calls
//     approves their own. One person enrolled under two names as not a
//     caller, or as not a caller and with a subject, counts as two
//     approvers; a passkey enrolled for P and the subject P at the
//     issuer count as one, which assumes, as excluding the requester
//     does, that the issuer's subjects are the principals of the
//     callers' tokens.
//   - Rate limits: the front door's limits apply.
//   - Key rotation: one Key; changing it ends every session and link.
package approve
