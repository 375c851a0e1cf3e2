package jupyter

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"strings"
)

// Password mode, as Open WebUI's "password" setting speaks it to a Jupyter
// Server: GET /login sets the _xsrf cookie; POST /login with the form's
// _xsrf and password sets the login cookie and redirects; later requests
// carry the cookies, and those that change something the X-XSRFToken
// header too. The password is a key of terp serve's: the login cookie
// holds it, HttpOnly, so the key ring decides as for a token.

const (
	xsrfCookie  = "_xsrf"
	loginCookie = "terp-jupyter-key"
	// maxLoginForm bounds the login form, which comes before any key.
	maxLoginForm = 16 << 10
)

// fromCookie is the key a logged-in client's cookies carry: for a request
// that changes something, only with an X-XSRFToken header that matches its
// _xsrf cookie (a page of another site can send the cookies, not read
// them); a websocket only from a client that sends no Origin or its own
// host's, for the same reason.
func fromCookie(r *http.Request) string {
	login, err := r.Cookie(loginCookie)
	if err != nil || login.Value == "" {
		return ""
	}
	switch {
	case r.Header.Get("Upgrade") != "":
		if o := r.Header.Get("Origin"); o != "" && !sameHost(o, r.Host) {
			return ""
		}
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		xsrf, err := r.Cookie(xsrfCookie)
		header := r.Header.Get("X-XSRFToken")
		if err != nil || xsrf.Value == "" || subtle.ConstantTimeCompare([]byte(header), []byte(xsrf.Value)) != 1 {
			return ""
		}
	}
	return login.Value
}

// sameHost reports whether the origin URL names host.
func sameHost(origin, host string) bool {
	_, rest, ok := strings.Cut(origin, "://")
	return ok && strings.EqualFold(strings.TrimSuffix(rest, "/"), host)
}

// loginForm sets a new _xsrf cookie and serves the form that carries it.
func (a *api) loginForm(w http.ResponseWriter, r *http.Request) {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	xsrf := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: xsrfCookie, Value: xsrf, Path: "/", SameSite: http.SameSiteLaxMode})
	a.writeForm(w, http.StatusOK, xsrf, "")
}

func (a *api) writeForm(w http.ResponseWriter, status int, xsrf, problem string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<!doctype html><title>terp serve</title><form method="post" action="/login">%s
<input type="hidden" name="_xsrf" value="%s"><label>Password (a key of terp serve's) <input type="password" name="password"></label>
<button>Log in</button></form>`, problem, html.EscapeString(xsrf))
}

// login checks the form's password as a key and sets the login cookie.
func (a *api) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	xsrf, err := r.Cookie(xsrfCookie)
	if err != nil || xsrf.Value == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("_xsrf")), []byte(xsrf.Value)) != 1 {
		http.Error(w, "the form's _xsrf does not match its cookie: GET /login first, and send the form it gives", http.StatusForbidden)
		return
	}
	password := r.PostFormValue("password")
	if _, ok := a.host.Lookup(password); !ok || password == "" {
		a.writeForm(w, http.StatusUnauthorized, xsrf.Value, "<p>That is not a key of this server's.</p>")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: password, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	next := r.URL.Query().Get("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusFound)
}
