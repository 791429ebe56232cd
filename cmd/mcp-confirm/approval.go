package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/keyfile"
	"github.com/mcp-confirm/mcp-confirm/internal/notify"
)

// notifyEnv names the environment variable that may hold the webhook
// URL: Slack's carries its token, which the command line shows every
// local user.
const notifyEnv = "MCP_CONFIRM_NOTIFY_WEBHOOK"

// approvalFlags configure out-of-band approval, shared by the server
// (which also sets who approves with --approval, --approvers and
// --approvals) and the proxy (whose policy's [[approval]] tables do): the
// approval page's sign-in and the notification webhook. The page is
// served by the HTTP front door under --public-url (authFlags).
type approvalFlags struct {
	server    bool // the server's flags registered
	mode      string
	approvers string
	approvals int

	issuer           string
	clientID         string
	clientSecretFile string
	groupsClaim      string
	scopes           string
	allowHTTPIssuer  bool
	passkeys         string
	notifyWebhook    string

	approval confirm.Approval // resolved
	webhook  string           // resolved: the flag, else $MCP_CONFIRM_NOTIFY_WEBHOOK
	warnings []string
	page     *approve.Handler // made by Setup.Page at start-up
}

// register defines the flags on fs; server adds who approves.
func (a *approvalFlags) register(fs *flag.FlagSet, server bool) {
	a.server = server
	if server {
		fs.StringVar(&a.mode, "approval", confirm.InBand.String(), "who approves delete_file: in-band (the person, whose answer the client relays), out-of-band (approvers\nsigned in on the approval page, which the client cannot be), or both (the person's yes and the approvers)")
		fs.StringVar(&a.approvers, "approvers", "", "out-of-band: who may approve, comma-separated: sub:SUBJECT (a subject at --approve-issuer) or group:GROUP\n(a value of its --approve-groups-claim). The caller, named sub:PRINCIPAL, never approves their own call")
		fs.IntVar(&a.approvals, "approvals", 0, "out-of-band: how many distinct approvers must approve (four-eyes: 2) (default 1)")
	}
	fs.StringVar(&a.issuer, "approve-issuer", "", "out-of-band: the OpenID Connect issuer (https) where approvers sign in to the approval page, served under\n--public-url's path + /approve/; register the redirect URI the server logs at start")
	fs.StringVar(&a.clientID, "approve-client-id", "", "out-of-band: the approval page's client ID at --approve-issuer")
	fs.StringVar(&a.clientSecretFile, "approve-client-secret-file", "", "out-of-band: file holding the page's client secret at --approve-issuer, readable by its owner only\n(without it, a public client: PKCE alone)")
	fs.StringVar(&a.groupsClaim, "approve-groups-claim", "", "out-of-band: the ID token claim listing the approver's groups, for group:GROUP approvers")
	fs.StringVar(&a.scopes, "approve-scopes", "", "out-of-band: scopes to request besides openid, space- or comma-separated (e.g. groups)")
	fs.StringVar(&a.passkeys, "approve-passkeys", "", "out-of-band: let approvers sign in with passkeys, enrolled through `mcp-confirm approvers add` (needs --key-file)\nand kept in this file (created 0600; replicas must share it). Approvers: passkey:NAME, or sub:P for its holder's --principal P")
	fs.BoolVar(&a.allowHTTPIssuer, "allow-http-approve-issuer", false, "out-of-band: accept an http:// --approve-issuer. INSECURE: whoever answers at its address signs in as any\napprover; for tests on loopback only")
	fs.StringVar(&a.notifyWebhook, "notify-webhook", "", "out-of-band: post each approval request (its link and question) to this Slack-compatible webhook (https).\nIts URL is a secret: better in $"+notifyEnv)
}

// resolve checks the flags, given the front door's --http address and
// --public-url, whether --key-file was given, and whether the policy
// needs out-of-band approval (the proxy's; the server's is --approval).
// getenv reads the environment.
func (a *approvalFlags) resolve(httpAddr, publicURL string, keyFile, policyNeeds bool, getenv func(string) string) error {
	if a.server {
		m, err := confirm.ParseMode(a.mode)
		if err != nil {
			return fmt.Errorf("--approval %q: want in-band, out-of-band or both", a.mode)
		}
		a.approval = confirm.Approval{Mode: m, Required: a.approvals}
		for n := range strings.SplitSeq(a.approvers, ",") {
			if n = strings.TrimSpace(n); n != "" {
				a.approval.Approvers = append(a.approval.Approvers, n)
			}
		}
		if a.approvals < 0 {
			return fmt.Errorf("--approvals %d: want 1 or more", a.approvals)
		}
		if err := a.approval.Check(); err != nil {
			msg := strings.TrimPrefix(err.Error(), "confirm: ")
			if m == confirm.InBand {
				return fmt.Errorf("--approvers and --approvals need --approval out-of-band or both (%s)", msg)
			}
			return fmt.Errorf("--approval %s --approvers %q --approvals %d: %s", m, a.approvers, a.approvals, msg)
		}
	}
	a.webhook = a.notifyWebhook
	if a.webhook == "" {
		a.webhook = getenv(notifyEnv)
	} else {
		a.warnings = append(a.warnings, "--notify-webhook carries the webhook's URL on the command line, where every local user can read it (ps, /proc); pass it in $"+notifyEnv+" instead")
	}
	need := policyNeeds || a.approval.Mode != confirm.InBand
	set := []struct {
		name string
		on   bool
	}{
		{"--approve-issuer", a.issuer != ""}, {"--approve-client-id", a.clientID != ""},
		{"--approve-client-secret-file", a.clientSecretFile != ""}, {"--approve-groups-claim", a.groupsClaim != ""},
		{"--approve-scopes", a.scopes != ""}, {"--allow-http-approve-issuer", a.allowHTTPIssuer}, {"--approve-passkeys", a.passkeys != ""},
		{"--notify-webhook (or $" + notifyEnv + ")", a.webhook != ""},
	}
	if !need {
		for _, f := range set {
			if name := f.name; f.on {
				if a.server {
					return fmt.Errorf("%s applies to out-of-band approval (--approval out-of-band or both)", name)
				}
				return fmt.Errorf("%s applies to out-of-band approval, which the policy asks of no tool ([[approval]] tables)", name)
			}
		}
		return nil
	}
	switch {
	// The page is served by the HTTP front door: over stdio, no approver
	// could reach it.
	case httpAddr == "":
		return errors.New("out-of-band approval needs --http: the approval page is served by the HTTP front door")
	case publicURL == "":
		return errors.New("out-of-band approval needs --public-url: the base URL of the approval page (and of the MCP endpoint) as browsers reach it")
	case a.issuer == "" && a.passkeys == "":
		return errors.New("out-of-band approval needs a way for approvers to sign in: --approve-issuer and --approve-client-id, or --approve-passkeys")
	case a.issuer != "" && a.clientID == "" || a.issuer == "" && a.clientID != "":
		return errors.New("--approve-issuer and --approve-client-id go together")
	// Enrolment links are sealed with the key file's first key; a random
	// key would make every link printed by approvers add useless.
	case a.passkeys != "" && !keyFile:
		return errors.New("--approve-passkeys needs --key-file: `mcp-confirm approvers add` seals enrolment links with its first key")
	}
	if a.webhook != "" {
		if _, err := notify.New(notify.Options{URL: a.webhook}); err != nil {
			return fmt.Errorf("--notify-webhook: %w", err)
		}
	}
	return nil
}

// apply sets s up for out-of-band approval, if the flags ask for it:
// the server's default approval, the approval page (made by Assemble,
// over the flow's ledger; a.page holds it afterwards), keyed by the first
// requestState key (a random one without --key-file), the webhook.
func (a *approvalFlags) apply(ctx context.Context, s *confirm.Setup, publicURL string, keys [][]byte, log *slog.Logger) error {
	for _, w := range a.warnings {
		log.Warn(w)
	}
	s.Approval = a.approval
	if a.issuer == "" && a.passkeys == "" {
		return nil
	}
	secret, err := a.clientSecret()
	if err != nil {
		return fmt.Errorf("--approve-client-secret-file: %w", err)
	}
	key := make([]byte, 32)
	if len(keys) > 0 {
		key = keys[0]
	} else {
		rand.Read(key) // this process alone: replicas need --key-file
	}
	oidc := approve.OIDC{Issuer: a.issuer, ClientID: a.clientID, ClientSecret: secret, GroupsClaim: a.groupsClaim,
		Scopes: strings.FieldsFunc(a.scopes, func(r rune) bool { return r == ' ' || r == ',' }), AllowHTTPIssuer: a.allowHTTPIssuer}
	var passkeys *approve.Passkeys
	if a.passkeys != "" {
		passkeys = &approve.Passkeys{File: a.passkeys}
	}
	s.Page = func(l *ledger.Ledger) (confirm.Page, error) {
		h, err := approve.New(ctx, approve.Options{Ledger: l, PublicURL: publicURL, Key: key, OIDC: oidc, Passkeys: passkeys, Logger: log})
		if err != nil {
			return nil, err
		}
		a.page = h
		log.Info("out-of-band approval: the approval page is served by the HTTP front door",
			"prefix", h.Prefix(), "redirect_uri", h.RedirectURL(), "issuer", a.issuer, "passkeys", a.passkeys,
			"requester", "the caller, named "+confirm.SubjectPrefix+"PRINCIPAL, never approves their own call")
		return h, nil
	}
	if a.webhook != "" {
		w, err := notify.New(notify.Options{URL: a.webhook, Logger: log})
		if err != nil {
			return fmt.Errorf("--notify-webhook: %w", err)
		}
		s.Notify = w.Notify
	}
	return nil
}

// clientSecret reads --approve-client-secret-file ("" without it).
func (a *approvalFlags) clientSecret() (string, error) {
	if a.clientSecretFile == "" {
		return "", nil
	}
	f, err := keyfile.OpenSecret(a.clientSecretFile)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return "", err
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s is empty", a.clientSecretFile)
	}
	return secret, nil
}
