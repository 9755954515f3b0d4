package distributor

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL's refusals of a login that retrying cannot heal, like Kafka's SASL and TLS
// refusals (refusedByKafka): they need a changed password, pg_hba.conf entry or role, so
// the distributor stops at once and says why instead of retrying as a standby forever.
// Everything else a connection meets — the server down or starting up (57P03), too many
// connections (53300), a network error, a database not created yet (3D000: a restore or a
// migration may create it) — is retried with backoff and shown as the stream's last error.
//
// The SQLSTATEs, from the server's errcodes:
//
//   - 28P01 invalid_password: a wrong password (password, md5 or SCRAM authentication);
//   - 28000 invalid_authorization_specification: no pg_hba.conf entry for the host, user,
//     database and TLS, the role does not exist, or it may not log in (NOLOGIN);
//   - 42501 insufficient_privilege during the connection: a role without REPLICATION on a
//     replication connection ("must be superuser or replication role to start
//     walsender"), or without CONNECT on the database.
//
// 42501 on a statement of a connection already open (a view's SELECT on a table it may not
// read) is not a login refusal: it stops that view only (failure.go).
var loginRefusals = map[string]string{
	"28P01": "wrong password",
	"28000": "login refused (pg_hba.conf, or the role does not exist or may not log in)",
	"42501": "the role lacks a privilege to connect (REPLICATION for capture: wal, or CONNECT on the database)",
}

// refusedByPostgres returns err wrapped with ErrPostgresAuth and what was refused when it
// is PostgreSQL refusing the distributor's login (loginRefusals), nil otherwise.
func refusedByPostgres(err error) error {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if !errors.As(err, &ce) || !errors.As(ce, &pe) {
		return nil
	}
	why, ok := loginRefusals[pe.Code]
	if !ok {
		return nil
	}
	return fmt.Errorf("%w (%s; not retried: fix the credentials, pg_hba.conf or the role): %w", ErrPostgresAuth, why, err)
}
