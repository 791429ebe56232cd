package serve

// Options returns the options in force, defaults filled in, for the test
// that spells every default out (TestHTTPDefaults); nothing outside the
// tests needs it, so it is not on the package's surface.
func (h *HTTP) Options() HTTPOptions { return h.opts }

// IsAnswerEvent is isAnswerEvent, for its table test.
var IsAnswerEvent = isAnswerEvent
