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
  mcp-confirm approvers add --key-file FILE --public-url URL [--ttl 24h] NAME

Prints a one-time link that enrols a passkey for the approver passkey:NAME on
the approval page of the server at URL (its --public-url; the page is at the
URL's origin, under /approve/), sealed with the first key of FILE (the
server's --key-file). Send it to that person only: whoever opens it first
enrols; it works once, until --ttl has passed.
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
	link, err := approve.EnrolLink(keys[0], u.Scheme+"://"+u.Host, name, *ttl)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-confirm approvers add: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, link)
	fmt.Fprintf(stderr, "mcp-confirm approvers add: send this link to %s only: it enrols one passkey, approving as %s%s, until %s\n",
		name, approve.PasskeyPrefix, name, time.Now().Add(*ttl).UTC().Format(time.RFC3339))
	return 0
}
