package approve

import "net/http"

// FormToken returns the form token of link for the session that cookie
// (the session cookie's value) holds: what the page's form carries. Attack
// tests use it to send a form that passes the token layer, so that what
// refuses it is the layer under test. "" if the cookie does not open.
func (h *Handler) FormToken(cookie *http.Cookie, link string) string {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(cookie)
	s, ok := h.session(r)
	if !ok {
		return ""
	}
	return h.keys.formToken(s.SID, link)
}

// CookieName returns the name of the session cookie.
func (h *Handler) CookieName() string { return h.cookieName(purposeSession) }
