package router

import (
	"context"
	"crypto/subtle"
	"net"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"seckill-proxy/conf"
)

// Failed AUTHs on one connection: the first authFreeFailures are answered at once; each one
// after waits authDelay more than the one before (at most authMaxDelay); the connection is
// closed after authMaxFailures. 100,000 guesses in one pipeline then cost one connection about
// five seconds and end at the tenth. A success starts the count again.
const (
	authFreeFailures = 3
	authDelay        = 100 * time.Millisecond
	authMaxDelay     = time.Second
	authMaxFailures  = 10
)

// errTooManyAuthFailures answers the failed AUTH that ends a connection.
var errTooManyAuthFailures = respError("ERR too many failed AUTH attempts on this connection; closing it")

// authStats count failed AUTHs for INFO, and hold the log's rate.
// credentials are the default user's password and the named users.
type credentials struct {
	password string
	users    map[string]conf.User
}

// open: with no password and no users, every client is the default user without AUTH.
func (c *credentials) open() bool { return c.password == "" && len(c.users) == 0 }

// has: name is a user clients may log in as (default, or one of the named users).
func (c *credentials) has(name string) bool {
	_, ok := c.users[name]
	return ok || name == "default"
}

// SetCredentials replaces the password and the users (a reload). Connections logged in
// already keep their login; every AUTH from now on is checked against the new ones.
func (r *Router) SetCredentials(password string, users []conf.User) {
	c := &credentials{password: password, users: make(map[string]conf.User, len(users))}
	for _, u := range users {
		c.users[u.Name] = u
	}
	r.creds.Store(c)
}

type authStats struct {
	failures, closed, revoked  atomic.Int64
	limitedSource, limitedUser atomic.Int64 // AUTHs refused unchecked (authlimit.go)
	sources, users             *failureLimits
	trusted                    trustedSources   // addresses that logged in lately, by user
	now                        func() time.Time // the clock of the failure budgets
	logged                     atomic.Int64     // failures counted in the last log line
	log                        rate.Sometimes
}

// cmdAuth checks a password in constant time. A failed AUTH keeps the earlier login, as in
// Redis. Passwords are never logged.
func (r *Router) cmdAuth(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	creds := r.creds.Load()
	if len(args) == 2 && creds.open() {
		return nil, respError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	}
	name, pass := "default", args[1]
	if len(args) == 3 {
		name, pass = string(args[1]), args[2]
	}
	now := r.auth.now()
	if err := r.authLimited(s, name, now); err != nil {
		return nil, err
	}
	want, admin := "", false
	if name == "default" {
		want, admin = creds.password, true
	} else if u, ok := creds.users[name]; ok {
		want, admin = u.Password, u.Role == conf.RoleAdmin
	}
	// Compare even for an unknown user, so that timing does not tell which users exist.
	match := subtle.ConstantTimeCompare(pass, []byte(want)) == 1
	if !match || want == "" {
		r.auth.sources.fail(sourceOf(s.Remote), now)
		if want != "" || name == "default" {
			r.auth.users.fail(name, now) // known users only: unknown names cannot fill the table
		}
		return nil, r.authFailed(ctx, s, name)
	}
	r.auth.trusted.add(name, sourceOf(s.Remote), now)
	s.Authed, s.User, s.Admin, s.authFailures = true, name, admin, 0
	s.creds, s.login = creds, conf.User{Name: name, Password: want, Role: conf.RoleApp}
	if admin {
		s.login.Role = conf.RoleAdmin
	}
	s.view.mu.Lock()
	s.view.user = name
	s.view.mu.Unlock()
	return OK, nil
}

// authFailed counts a failed AUTH, logs it (at most once a second, with how many came since),
// and answers it: WRONGPASS, after a delay once a connection has failed a few times in a row,
// and the last time with an error that closes the connection.
func (r *Router) authFailed(ctx context.Context, s *Session, user string) error {
	s.authFailures++
	total := r.auth.failures.Add(1)
	r.auth.log.Do(func() {
		since := total - r.auth.logged.Swap(total)
		r.log.Warn("failed AUTH", zap.String("remote", s.Remote), zap.String("user", user),
			zap.Int("in_a_row_on_this_connection", s.authFailures), zap.Int64("failures_since_last_log", since))
	})
	if s.authFailures >= authMaxFailures {
		r.auth.closed.Add(1)
		s.Quit = true
		return errTooManyAuthFailures
	}
	if extra := s.authFailures - authFreeFailures; extra > 0 {
		t := time.NewTimer(min(time.Duration(extra)*authDelay, authMaxDelay))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return respError("WRONGPASS invalid username-password pair or user is disabled.")
}

var (
	errProtectedMode = respError("DENIED seckill-proxy is running in protected mode: it has no password and no users, so it serves loopback clients only. Set users (SECKILL_USERS) or password")
	errRevoked       = respError("NOAUTH this connection's user was removed by a reload; the connection is closed")
)

// stale: the session must be looked at again before a command runs (see recheck).
func (s *Session) stale(r *Router) bool {
	return s.denied || s.revoked || s.creds != r.creds.Load() || s.muted()
}

// recheck holds s's login against the credentials now in force: a login whose user is gone
// is revoked, as Redis's ACL DELUSER disconnects a user's clients; a changed role takes effect
// at once (a downgraded admin is an app user from its next command); a changed password
// keeps the connections logged in with the old one, as Redis does. A client that had not
// logged in is left to AUTH; one that was open (no credentials) is revoked once there are
// credentials, and allowed once there are none.
func (r *Router) recheck(s *Session) {
	cur := r.creds.Load()
	s.creds = cur
	if !s.Authed {
		if cur.open() && !s.denied {
			s.Authed, s.Admin, s.User = true, true, "default"
			s.login = conf.User{Name: "default", Role: conf.RoleAdmin}
			s.denied = r.opt.ProtectedMode && !onLoopback(s.Remote)
		}
		return
	}
	switch u, ok := cur.users[s.login.Name]; {
	case cur.open():
	case s.login.Name == "default" && cur.password != "":
	case s.login.Name != "default" && ok:
		s.Admin = u.Role == conf.RoleAdmin
	default:
		s.revoked = true
		r.auth.revoked.Add(1)
	}
}

// onLoopback: remote ("host:port") is a loopback address, or not an IP address at all (a
// Unix socket, a test's pipe).
func onLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return true
	}
	ip := net.ParseIP(host)
	return ip == nil || ip.IsLoopback()
}
