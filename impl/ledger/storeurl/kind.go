package storeurl

// Kind names the kind of store rawURL names — "memory", "redis" or
// "postgres" — as metrics label a store (observe.Options.Store); an error
// wraps [ErrUnsupported].
func Kind(rawURL string) (string, error) {
	kind, err := parse(rawURL)
	if err != nil {
		return "", err
	}
	return [...]string{memory: "memory", redisStore: "redis", postgresStore: "postgres"}[kind], nil
}
