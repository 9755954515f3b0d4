package distributor

import (
	"reflect"
	"testing"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/player"
)

// TestAdminConfigMirrorsDaemon: the public config types have the fields and YAML keys of
// the daemon types they are loaded as (and of the player's types of the same names), and
// admin carries every field over.
func TestAdminConfigMirrorsDaemon(t *testing.T) {
	testenv.SameFields(t, reflect.TypeFor[AdminConfig](), reflect.TypeFor[daemon.Admin]())
	testenv.SameFields(t, reflect.TypeFor[AdminConfig](), reflect.TypeFor[player.AdminConfig]())
	testenv.SameFields(t, reflect.TypeFor[TLSConfig](), reflect.TypeFor[player.TLSConfig]())
	testenv.SameFields(t, reflect.TypeFor[TokensConfig](), reflect.TypeFor[player.TokensConfig]())
	a := AdminConfig{Addr: "a", Tokens: TokensConfig{File: "f", Env: "e"}, TLS: TLSConfig{CertFile: "c", KeyFile: "k", ClientCAFile: "ca"}}
	want := daemon.Admin{Addr: "a", Tokens: daemon.Tokens{File: "f", Env: "e"}, TLS: daemon.ServerTLS{CertFile: "c", KeyFile: "k", ClientCAFile: "ca"}}
	if got := a.admin(); got != want {
		t.Fatalf("admin() = %+v, want %+v", got, want)
	}
}
