package admin

// Authentication of the admin server: the token, the dashboard's sessions
// and the slowing down of wrong guesses.
//
//   - The token is compared as SHA-256 digests in constant time, so neither
//     its content nor its length shows in the time a refusal takes.
//   - A wrong token (bearer header or login form) counts against the client
//     address (IPv6: its /64). After failFree failures each further attempt
//     from there is refused with 429 and Retry-After, unchecked, for a delay
//     that doubles with each failure up to failCap. At most maxTracked
//     addresses are kept; idle ones are forgotten after failForget (an hour
//     after their last attempt, refused ones included). When the table is
//     full, the entry with the fewest failures (the longest idle of those)
//     makes room, never one that has reached failFree: failures from other
//     addresses must not give a held-back client fresh guesses. If every
//     entry has reached failFree, new addresses share one overflow entry,
//     which is held back like any client (an admin arriving from a new
//     address during such an attack waits too; a right token never clears
//     the shared entry).
//   - A session is "v2.<id|issued|expires>.<HMAC>" under a key made at
//     process start: it expires after SessionTTL (12 h) and logout revokes
//     its id. Revocations are kept in memory until the session would have
//     expired; a restart ends every session (a new key), which is why
//     nothing has to be stored. If more than maxRevoked revocations are
//     live, every session issued so far is ended at once instead.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Defaults of the authentication; see the package comment above.
const (
	SessionTTL = 12 * time.Hour
	failFree   = 5
	failBase   = time.Second
	failCap    = 15 * time.Minute
	failForget = time.Hour
	maxTracked = 4096
	maxRevoked = 4096
)

type auth struct {
	digest  [sha256.Size]byte
	key     []byte
	now     func() time.Time
	ttl     time.Duration
	proxies []netip.Prefix

	mu        sync.Mutex
	revoked   map[[16]byte]time.Time // session id -> its expiry
	notBefore time.Time              // sessions issued earlier are void
	clients   map[string]*failures
	overflow  failures // every untracked address while the table is full of held-back ones
}

type failures struct {
	n           int
	until, last time.Time
}

func newAuth(o Options) *auth {
	a := &auth{digest: sha256.Sum256([]byte(o.Token)), key: make([]byte, 32), now: o.Now, ttl: o.SessionTTL,
		proxies: o.TrustedProxies, revoked: map[[16]byte]time.Time{}, clients: map[string]*failures{}}
	if a.now == nil {
		a.now = time.Now
	}
	if a.ttl <= 0 {
		a.ttl = SessionTTL
	}
	if _, err := rand.Read(a.key); err != nil {
		panic("admin: no randomness for the session key: " + err.Error())
	}
	return a
}

// tokenOK compares digests in constant time: equal length always.
func (a *auth) tokenOK(got string) bool {
	d := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(d[:], a.digest[:]) == 1
}

// checkToken applies the failure limiter around tokenOK. retry > 0 means
// the client is held back and the token was not looked at.
func (a *auth) checkToken(r *http.Request, token string) (ok bool, retry time.Duration) {
	key := a.clientKey(r)
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.clients[key]
	shared := false
	if f == nil && !a.makeRoom(now) {
		f, shared = &a.overflow, true
	}
	if f != nil && now.Before(f.until) {
		f.last = now // refused, yet still trying: not idle
		return false, f.until.Sub(now)
	}
	if f != nil && now.Sub(f.last) > failForget {
		// idle for an hour: a fresh start
		if shared {
			a.overflow = failures{}
		} else {
			delete(a.clients, key)
			f = nil
		}
	}
	if a.tokenOK(token) {
		if !shared {
			delete(a.clients, key)
		}
		return true, 0
	}
	if f == nil {
		f = &failures{}
		a.clients[key] = f
	}
	f.n++
	f.last = now
	if f.n >= failFree {
		d := failBase << min(f.n-failFree, 30)
		if d > failCap || d <= 0 {
			d = failCap
		}
		f.until = now.Add(d)
	}
	return false, 0
}

// makeRoom keeps the table of failing clients bounded (a.mu held): false
// means no entry may go, every one having reached failFree.
func (a *auth) makeRoom(now time.Time) bool {
	if len(a.clients) < maxTracked {
		return true
	}
	victim, vf := "", (*failures)(nil)
	for k, f := range a.clients {
		if now.Sub(f.last) > failForget && !now.Before(f.until) {
			delete(a.clients, k)
			continue
		}
		if f.n >= failFree {
			continue // held back, or will be at its next failure: it stays
		}
		if vf == nil || f.n < vf.n || (f.n == vf.n && f.last.Before(vf.last)) {
			victim, vf = k, f
		}
	}
	if len(a.clients) < maxTracked {
		return true
	}
	if vf == nil {
		return false
	}
	delete(a.clients, victim)
	return true
}

// clientKey is the address failures are counted against: the TCP peer, or
// behind a trusted proxy the right-most X-Forwarded-For entry that is not a
// proxy; an IPv6 client counts as its /64, which one host usually owns.
func (a *auth) clientKey(r *http.Request) string {
	addr, ok := a.clientAddr(r)
	if !ok {
		return r.RemoteAddr
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

func (a *auth) clientAddr(r *http.Request) (netip.Addr, bool) {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	addr := peer.Addr().Unmap()
	if !a.trusted(addr) {
		return addr, true
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		x, err := netip.ParseAddr(h)
		if err != nil {
			ap, perr := netip.ParseAddrPort(h)
			if perr != nil {
				return addr, true
			}
			x = ap.Addr()
		}
		if x = x.Unmap(); !a.trusted(x) {
			return x, true
		}
	}
	return addr, true
}

func (a *auth) trusted(x netip.Addr) bool {
	for _, p := range a.proxies {
		if p.Contains(x) {
			return true
		}
	}
	return false
}

const sessionPrefix = "v2."

// newSession issues a session value: id, issue time and expiry, signed.
func (a *auth) newSession() (string, time.Time) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	now := a.now()
	exp := now.Add(a.ttl)
	body := make([]byte, 0, 32)
	body = append(body, id[:]...)
	body = binary.BigEndian.AppendUint64(body, uint64(now.Unix()))
	body = binary.BigEndian.AppendUint64(body, uint64(exp.Unix()))
	return sessionPrefix + base64.RawURLEncoding.EncodeToString(body) + "." +
		base64.RawURLEncoding.EncodeToString(a.mac(body)), exp
}

func (a *auth) mac(body []byte) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("hookwarden admin session v2\x00"))
	m.Write(body)
	return m.Sum(nil)
}

// session parses and checks a session value.
func (a *auth) session(v string) (id [16]byte, exp time.Time, ok bool) {
	rest, found := strings.CutPrefix(v, sessionPrefix)
	if !found {
		return id, exp, false
	}
	b64, sig, found := strings.Cut(rest, ".")
	if !found {
		return id, exp, false
	}
	body, err1 := base64.RawURLEncoding.DecodeString(b64)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || len(body) != 32 || !hmac.Equal(mac, a.mac(body)) {
		return id, exp, false
	}
	copy(id[:], body[:16])
	issued := time.Unix(int64(binary.BigEndian.Uint64(body[16:24])), 0)
	exp = time.Unix(int64(binary.BigEndian.Uint64(body[24:32])), 0)
	now := a.now()
	if !now.Before(exp) {
		return id, exp, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, gone := a.revoked[id]; gone || issued.Before(a.notBefore) {
		return id, exp, false
	}
	return id, exp, true
}

// revoke ends one session before its expiry.
func (a *auth) revoke(v string) {
	id, exp, ok := a.session(v)
	if !ok {
		return
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, e := range a.revoked {
		if !now.Before(e) {
			delete(a.revoked, k)
		}
	}
	if len(a.revoked) >= maxRevoked {
		// Bounded memory: end every session issued until now instead.
		a.notBefore = now.Add(time.Second).Truncate(time.Second)
		clear(a.revoked)
		return
	}
	a.revoked[id] = exp
}
