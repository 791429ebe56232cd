package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/internal/keyfile"
)

const approversUsage = `Usage:
  mcp-confirm approvers add --key-file FILE --public-url URL (--principal P | --not-a-caller) [--ttl 24h] NAME

Prints a one-time link that enrols a passkey named NAME (approvers list it as
passkey:NAME) on the approval page of the server at URL (its --public-url; the
page is at the URL's origin, under /approve/), sealed with the first key of
FILE (the server's --key-file). Send it to that person only: whoever opens it
first enrols; it works once, until --ttl has passed.

--principal P names the principal the person's own MCP calls carry (their
bearer token's subject, as --auth-tokens or the issuer names it): signed in
with the passkey they are sub:P, who never approves their own calls.
--not-a-caller says the person makes no MCP calls (holds no token the server
accepts): signed in they are passkey:NAME. One of the two is required.
`

// runApprovers runs `mcp-confirm approvers add`.
func runApprovers(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stderr, approversUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "add" {
		fmt.Fprint(stderr, "mcp-confirm approvers: want add\n"+approversUsage)
		return 2
	}
	fs := flag.NewFlagSet("mcp-confirm approvers add", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	keyFile := fs.String("key-file", "", "the server's key file")
	publicURL := fs.String("public-url", "", "the server's public URL")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the link works")
	principal := fs.String("principal", "", "the principal of the person's own MCP calls")
	notCaller := fs.Bool("not-a-caller", false, "the person makes no MCP calls")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, approversUsage)
			return 0
		}
		fmt.Fprintf(stderr, "mcp-confirm approvers add: %v\n%s", err, approversUsage)
		return 2
	}
	if fs.NArg() != 1 || *keyFile == "" || *publicURL == "" {
		fmt.Fprint(stderr, "mcp-confirm approvers add: want --key-file, --public-url and one NAME\n"+approversUsage)
		return 2
	}
	// Self-approval: a passkey whose holder's calls are unknown could
	// approve them; the operator says which principal is theirs.
	if (*principal == "") == !*notCaller {
		fmt.Fprint(stderr, "mcp-confirm approvers add: want one of --principal P (the principal of the person's own MCP calls) and --not-a-caller\n"+approversUsage)
		return 2
	}
	name := fs.Arg(0)
	keys, err := keyfile.Read(*keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm approvers add: %v\n", err)
		return 1
	}
	u, err := url.Parse(*publicURL)
	if err != nil || u.Host == "" {
		fmt.Fprintf(stderr, "mcp-confirm approvers add: --public-url %q: want an absolute URL\n", *publicURL)
		return 2
	}
	h := approve.Holder{Name: name, Principal: *principal, NotCaller: *notCaller}
	link, err := approve.EnrolLink(keys[0], u.Scheme+"://"+u.Host, h, *ttl)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm approvers add: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, link)
	as := approve.PasskeyPrefix + name
	if h.Principal != "" {
		as = approve.SubjectPrefix + h.Principal + " (listed as " + as + " or " + approve.SubjectPrefix + h.Principal + "; never on their own calls)"
	}
	fmt.Fprintf(stderr, "mcp-confirm approvers add: send this link to %s only: it enrols one passkey, approving as %s, until %s\n",
		name, as, time.Now().Add(*ttl).UTC().Format(time.RFC3339))
	return 0
}
