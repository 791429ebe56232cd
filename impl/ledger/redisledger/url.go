package redisledger

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger/internal/redact"
)

// SentinelScheme is the scheme of a URL naming a Redis primary through
// its Sentinels (see [Open]).
const SentinelScheme = "redis-sentinel"

// Query parameters [Open] reads itself, before go-redis reads the rest.
const (
	replicasParam         = "replicas"          // Options.Replicas
	waitParam             = "wait"              // Options.ReplicaTimeout
	sentinelUserParam     = "sentinel_username" // the Sentinels' own ACL user
	sentinelPasswordParam = "sentinel_password" // and password
)

// target is what a URL names: the client to make, the server to name in
// errors, and the secrets errors must not show.
type target struct {
	client  *redis.Client
	server  string   // host:port, or the Sentinels and the primary's name
	secrets []string // passwords in the URL
}

// parseURL reads rawURL into the client it names, and the Replicas and
// ReplicaTimeout its query sets into opts.
func parseURL(rawURL string, opts Options) (target, Options, error) {
	scheme, _, _ := strings.Cut(rawURL, "://")
	if strings.EqualFold(scheme, SentinelScheme) {
		return parseSentinelURL(rawURL, opts)
	}
	secrets := redact.URLPasswords(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return target{}, opts, urlError(err, secrets)
	}
	q := u.Query()
	if opts, err = replicaParams(q, opts); err != nil {
		return target{}, opts, urlError(err, secrets)
	}
	u.RawQuery = q.Encode()
	ropts, err := redis.ParseURL(u.String())
	if err != nil {
		return target{}, opts, urlError(err, secrets)
	}
	ropts.ContextTimeoutEnabled = true
	widenReadTimeout(&ropts.ReadTimeout, opts)
	return target{client: redis.NewClient(ropts), server: ropts.Addr, secrets: secrets}, opts, nil
}

// parseSentinelURL reads a redis-sentinel:// URL (see [Open]).
func parseSentinelURL(rawURL string, opts Options) (target, Options, error) {
	_, rest, _ := strings.Cut(rawURL, "://")
	authority, pathQuery := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, pathQuery = rest[:i], rest[i:]
	}
	var user *url.Userinfo
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		// The user info alone, parsed as a URL's, so that its escapes
		// (a '@' or ':' in the password) decode as a redis:// URL's do.
		u, err := url.Parse("redis://" + authority[:at+1] + "host")
		if err != nil {
			return target{}, opts, urlError(err, redact.URLPasswords(rawURL))
		}
		user, authority = u.User, authority[at+1:]
	}
	secrets := redact.URLPasswords(rawURL)
	if pw, ok := user.Password(); ok {
		secrets = append(secrets, pw)
	}
	u, err := url.Parse("redis://sentinel" + pathQuery)
	if err != nil {
		return target{}, opts, urlError(err, secrets)
	}
	q := u.Query()
	secrets = append(secrets, q[sentinelPasswordParam]...)
	var addrs []string
	for _, a := range strings.Split(authority, ",") {
		h, p, err := net.SplitHostPort(a)
		if err != nil || h == "" || p == "" {
			return target{}, opts, urlError(fmt.Errorf("sentinel address %q: want host:port", a), secrets)
		}
		addrs = append(addrs, net.JoinHostPort(h, p))
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if parts[0] == "" || len(parts) > 2 {
		return target{}, opts, urlError(errors.New("want the primary's name as the path (/mymaster, or /mymaster/DB)"), secrets)
	}
	master, err := url.PathUnescape(parts[0])
	if err != nil {
		return target{}, opts, urlError(err, secrets)
	}
	if opts, err = replicaParams(q, opts); err != nil {
		return target{}, opts, urlError(err, secrets)
	}
	// go-redis reads every other parameter (timeouts, pool sizes), and
	// refuses one it does not know, from a URL of its own form.
	sentinelUser, sentinelPassword := q.Get(sentinelUserParam), q.Get(sentinelPasswordParam)
	q.Del(sentinelUserParam)
	q.Del(sentinelPasswordParam)
	q.Set("master_name", master)
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	if len(parts) == 2 {
		q.Set("db", parts[1])
	}
	fo, err := redis.ParseFailoverURL((&url.URL{Scheme: "redis", Host: addrs[0], RawQuery: q.Encode()}).String())
	if err != nil {
		return target{}, opts, urlError(err, secrets)
	}
	fo.SentinelUsername, fo.SentinelPassword = sentinelUser, sentinelPassword
	if user != nil {
		fo.Username = user.Username()
		fo.Password, _ = user.Password()
	}
	fo.ContextTimeoutEnabled = true
	widenReadTimeout(&fo.ReadTimeout, opts)
	return target{
		client:  redis.NewFailoverClient(fo),
		server:  fmt.Sprintf("primary %q of Sentinels %s", master, strings.Join(addrs, ",")),
		secrets: secrets,
	}, opts, nil
}

// replicaParams reads the replicas and wait parameters of q into opts,
// and deletes them from q. A URL and opts that both set one must agree.
func replicaParams(q url.Values, opts Options) (Options, error) {
	if v, ok := q[replicasParam]; ok {
		n, err := strconv.Atoi(v[len(v)-1])
		if err != nil || n < 0 {
			return opts, fmt.Errorf("%s=%q: want a number of replicas", replicasParam, v[len(v)-1])
		}
		if opts.Replicas != 0 && opts.Replicas != n {
			return opts, fmt.Errorf("%s=%d, but Options.Replicas is %d", replicasParam, n, opts.Replicas)
		}
		opts.Replicas = n
		q.Del(replicasParam)
	}
	if v, ok := q[waitParam]; ok {
		d, err := time.ParseDuration(v[len(v)-1])
		if err != nil || d <= 0 {
			return opts, fmt.Errorf("%s=%q: want a positive duration, e.g. 500ms", waitParam, v[len(v)-1])
		}
		if opts.ReplicaTimeout != 0 && opts.ReplicaTimeout != d {
			return opts, fmt.Errorf("%s=%v, but Options.ReplicaTimeout is %v", waitParam, d, opts.ReplicaTimeout)
		}
		opts.ReplicaTimeout = d
		q.Del(waitParam)
	}
	return opts, nil
}

// widenReadTimeout makes go-redis's default read timeout (3 s) outlast a
// longer WAIT, so that the client does not give up on a reply the server
// is still bound to send. A read timeout the URL set is kept: a WAIT that
// outlasts it fails, closed.
func widenReadTimeout(rt *time.Duration, opts Options) {
	wait := opts.ReplicaTimeout
	if opts.Replicas > 0 && wait == 0 {
		wait = DefaultReplicaTimeout
	}
	if *rt == 0 && wait > 2*time.Second {
		*rt = wait + time.Second
	}
}

// urlError describes why a URL did not parse without echoing it: a
// *url.Error quotes the whole URL, password included, and the reasons
// quote parts of it.
func urlError(err error, secrets []string) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return fmt.Errorf("redisledger: invalid URL (not shown): %s", redact.Scrub(err.Error(), secrets...))
}
