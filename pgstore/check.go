package pgstore

// Check: what `hookwarden check` asks of a database.url before serve runs
// on it, without changing anything.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ConnectError is a connection that failed, said without the URL (which
// may hold a password): the server unreachable, or refusing the
// credentials or the database.
type ConnectError struct {
	Address string // host, port and database
	Refused bool   // the server answered and refused (credentials, database)
	Reason  string
}

func (e *ConnectError) Error() string {
	if e.Refused {
		return fmt.Sprintf("%s refused the connection: %s", e.Address, e.Reason)
	}
	return fmt.Sprintf("cannot reach %s: %s", e.Address, e.Reason)
}

// connectError describes err, the failure to connect to address, in words
// that hold no secret: pgx's own message names the user and may quote the
// connection string.
func connectError(address string, err error) *ConnectError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		reason := pe.Message
		switch {
		case strings.HasPrefix(pe.Code, "28"):
			reason = "the credentials were refused (" + pe.Message + ")"
		case pe.Code == "3D000":
			reason = "no such database (" + pe.Message + ")"
		}
		return &ConnectError{Address: address, Refused: true, Reason: reason}
	}
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &oe):
		return &ConnectError{Address: address, Reason: oe.Err.Error()}
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return &ConnectError{Address: address, Reason: "no answer within the connect timeout"}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && errors.Unwrap(ce) != nil {
		return &ConnectError{Address: address, Reason: errors.Unwrap(ce).Error()}
	}
	return &ConnectError{Address: address, Reason: "connection failed"}
}

// Check connects to the database at url once and reports what Open would
// refuse: a URL that does not parse, a server that cannot be reached or
// refuses the credentials (*ConnectError), a durability setting
// (*SettingError), a schema newer than this build's (ErrNewerSchema). It
// migrates nothing and writes nothing. version is the schema's version (0:
// none yet, serve creates it).
func Check(ctx context.Context, url string, connectTimeout time.Duration) (version int, err error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return 0, errors.New("not a valid PostgreSQL URL")
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	addr := address(cfg)
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, connectError(addr, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if err := checkSettings(ctx, c); err != nil {
		return 0, err
	}
	v, err := schemaVersion(ctx, c)
	if err != nil {
		return 0, fmt.Errorf("read schema version of %s: %w", addr, err)
	}
	if v > SchemaVersion() {
		return v, fmt.Errorf("database %s has schema version %d, newer than this build's %d: use a newer hookwarden: %w",
			addr, v, SchemaVersion(), ErrNewerSchema)
	}
	return v, nil
}
