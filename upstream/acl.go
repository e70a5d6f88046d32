package upstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/sale"
)

// ErrCannotVerifyACL: the proxy's own Redis user may not run ACL DRYRUN, so the pass-through
// user's rule could not be checked. The caller decides whether to go on.
var ErrCannotVerifyACL = errors.New("cannot verify the pass-through user's ACL")

// aclProbes are what the pass-through user must be refused, and one thing it must be allowed
// (which also proves that the user exists).
var aclProbes = []struct {
	args    []any
	allowed bool
}{
	{[]any{"SET", sale.SaleKeyPrefix + "acl-probe}:stock", "1"}, false},
	{[]any{"HSET", sale.SaleKeyPrefix + "acl-probe}:meta", "state", "open"}, false},
	{[]any{"SADD", sale.SalesKey, "acl-probe"}, false},
	{[]any{"SET", sale.LegacyStockPrefix + "acl-probe", "1"}, false},
	{[]any{"PUBLISH", sale.EventsChannel, "close acl-probe x"}, false},
	{[]any{"FLUSHALL"}, false},
	{[]any{"ACL", "SETUSER", "acl-probe"}, false},
	{[]any{"SET", "acl-probe", "1"}, true},
}

// ACLError says why the pass-through user is unfit: it is missing, or allowed what it must
// not be, or refused what it needs.
type ACLError struct{ Reasons []string }

func (e *ACLError) Error() string {
	return "the pass-through user is unfit: " + strings.Join(e.Reasons, "; ") +
		" (create it with the rule that seckill-proxy -print-redis-acl prints, on every node)"
}

// VerifyACL checks, with ACL DRYRUN on every node of the cluster (replicas too: ACLs are not
// replicated, and a replica may be promoted), that the pass-through user exists and may not
// write the sales' keys, publish on their events channel, or flush. It returns nil when there
// is no restricted user to check or the user is fit; an *ACLError naming each node and
// command when it is not; ErrCannotVerifyACL without the right to run ACL DRYRUN; and any
// other error when Redis could not be asked.
func (c *Cluster) VerifyACL(ctx context.Context) error {
	if !c.opt.Restricted {
		return nil
	}
	var mu sync.Mutex
	var unfit []string
	check := func(ctx context.Context, node *redis.Client) error {
		for _, p := range aclProbes {
			args := append([]any{"ACL", "DRYRUN", c.opt.Username}, p.args...)
			reply, err := node.Do(ctx, args...).Text()
			var rerr redis.Error
			var why string
			switch {
			case err != nil && redis.HasErrorPrefix(err, "NOPERM"):
				return fmt.Errorf("%w: redis %s: %v", ErrCannotVerifyACL, node.Options().Addr, err)
			case errors.As(err, &rerr): // "ERR User '...' not found", say
				why = rerr.Error()
			case err != nil:
				return err
			case p.allowed && reply != "OK":
				why = fmt.Sprintf("%v is refused (%s), and must be allowed", p.args, reply)
			case !p.allowed && reply == "OK":
				why = fmt.Sprintf("%v is allowed, and must be refused", p.args)
			default:
				continue
			}
			mu.Lock()
			unfit = append(unfit, "redis "+node.Options().Addr+" user "+c.opt.Username+": "+why)
			mu.Unlock()
			return nil
		}
		return nil
	}
	var err error
	if c.opt.Standalone != "" {
		err = c.rc.ForEachMaster(ctx, check)
	} else {
		err = c.rc.ForEachShard(ctx, check)
	}
	switch {
	case err != nil:
		return err
	case len(unfit) > 0:
		slices.Sort(unfit)
		return &ACLError{Reasons: unfit}
	}
	c.verified.Store(true)
	return nil
}

// CheckACL runs VerifyACL until it has an answer, retrying every retry while Redis cannot be
// asked; pass-through commands are answered UNAVAILABLE until then. It returns nil once the
// user is verified (or cannot be, for want of the right to run ACL DRYRUN, which it logs), the
// *ACLError that proves the user unfit, or ctx's error.
func (c *Cluster) CheckACL(ctx context.Context, log *zap.Logger, retry time.Duration) error {
	if !c.opt.Restricted {
		log.Warn("redis.passthrough_username is empty: pass-through runs as the proxy's own Redis user, so every script and function is refused")
		c.verified.Store(true)
		return nil
	}
	for {
		vctx, cancel := context.WithTimeout(ctx, c.opt.Timeout+c.opt.DialTimeout)
		err := c.VerifyACL(vctx)
		cancel()
		var unfit *ACLError
		switch {
		case err == nil:
			log.Info("pass-through user verified", zap.String("user", c.opt.Username))
			return nil
		case errors.As(err, &unfit):
			return err
		case errors.Is(err, ErrCannotVerifyACL):
			log.Warn("the pass-through user's ACL is not verified: the proxy's own Redis user may not run ACL DRYRUN", zap.Error(err))
			c.verified.Store(true)
			return nil
		}
		log.Warn("cannot verify the pass-through user yet; pass-through waits", zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retry):
		}
	}
}

// errACLUnverified answers pass-through commands until CheckACL has verified the user.
var errACLUnverified = errors.New("pass-through waits until the pass-through user's Redis ACL is verified")
