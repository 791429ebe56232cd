package main

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// The upstream command's environment. It never inherits the proxy's whole
// environment: that holds $MCP_CONFIRM_LEDGER (a URL that may carry a
// password) and whatever else the operator's shell exports (tokens, cloud
// credentials), and the upstream is a program nobody here wrote. It gets a
// few variables a program needs to run — the list below, as the MCP
// TypeScript SDK's getDefaultEnvironment passes to a stdio server, plus the
// locale, the time zone and the temporary directory — and what
// --upstream-env names.

// inheritedEnv returns the names of the variables an upstream command
// inherits by default. A variable whose name starts with one of the
// prefixes (ending in '_') is inherited too.
func inheritedEnv(goos string) (names, prefixes []string) {
	if goos == "windows" {
		return []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE",
			"PROGRAMFILES", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "TZ", "USERNAME", "USERPROFILE"}, nil
	}
	return []string{"HOME", "LANG", "LANGUAGE", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER"}, []string{"LC_"}
}

// reservedEnvPrefix names the proxy's own variables: never passed on.
const reservedEnvPrefix = "MCP_CONFIRM_"

// upstreamEnvFlag collects repeated --upstream-env NAME or NAME=VALUE.
type upstreamEnvFlag []string

func (u *upstreamEnvFlag) String() string { return strings.Join(*u, ",") }

func (u *upstreamEnvFlag) Set(v string) error {
	name, _, _ := strings.Cut(v, "=")
	switch {
	case name == "":
		return errors.New("want NAME or NAME=VALUE")
	case strings.ContainsRune(v, 0):
		return errors.New("contains a NUL byte")
	case strings.HasPrefix(strings.ToUpper(name), reservedEnvPrefix):
		// The proxy's own settings ($MCP_CONFIRM_LEDGER and its password)
		// are the proxy's, never the upstream's.
		return fmt.Errorf("%s: the proxy's own variables (%s*) are never passed to the upstream", name, reservedEnvPrefix)
	}
	*u = append(*u, v)
	return nil
}

// upstreamEnv returns the environment of the upstream command, given the
// proxy's own (environ, as os.Environ returns it) and the --upstream-env
// values: the inherited variables that are set, then each NAME the flags
// pass and each NAME=VALUE they give, a later value of a name replacing an
// earlier one. unset lists the NAMEs passed that the proxy's environment
// does not hold.
func upstreamEnv(environ []string, goos string, pass []string) (env, unset []string) {
	names, prefixes := inheritedEnv(goos)
	key := func(name string) string { return name }
	if goos == "windows" {
		key = strings.ToUpper // names are case-insensitive there
	}
	set := func(name, value string) {
		i := slices.IndexFunc(env, func(kv string) bool { n, _, _ := strings.Cut(kv, "="); return key(n) == key(name) })
		if i < 0 {
			env = append(env, name+"="+value)
			return
		}
		env[i] = name + "=" + value
	}
	lookup := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		lookup[key(name)] = value
		inherited := slices.Contains(names, key(name)) || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
		// A value that starts with "()" is a shell function export, which
		// bash runs (Shellshock); the TypeScript SDK skips them too.
		if inherited && !strings.HasPrefix(value, "()") {
			set(name, value)
		}
	}
	for _, p := range pass {
		name, value, given := strings.Cut(p, "=")
		if !given {
			var ok bool
			if value, ok = lookup[key(name)]; !ok {
				unset = append(unset, name)
				continue
			}
		}
		set(name, value)
	}
	return env, unset
}

// inheritedDescription names what an upstream command inherits here, for
// --help.
func inheritedDescription() []string {
	names, prefixes := inheritedEnv(runtime.GOOS)
	for _, p := range prefixes {
		names = append(names, p+"*")
	}
	return names
}
