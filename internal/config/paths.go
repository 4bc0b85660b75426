package config

// Paths and addresses: what `serve` would stop on when it opens files and
// binds ports, checked ahead so that `check` finds it in the same pass.

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// MinRemoteTokenLen is the shortest admin.token accepted when admin.listen
// is not a loopback address: 32 characters of a random token are far beyond
// online guessing, even before the admin server slows failures down.
const MinRemoteTokenLen = 32

// ResolvePaths makes the relative paths of the file absolute against dir,
// the configuration file's directory: database.path, every file: secret and
// the TLS files. A path that starts with a variable (${CREDENTIALS_DIRECTORY})
// is left alone: it is absolute once expanded. Call it after ApplyDefaults
// (the default database path is relative too) and before Validate.
func (c *Config) ResolvePaths(dir string) {
	if dir == "" {
		return
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		dir = abs
	}
	c.Database.Path = resolvePath(dir, c.Database.Path)
	c.TLS.Cert = resolvePath(dir, c.TLS.Cert)
	c.TLS.Key = resolvePath(dir, c.TLS.Key)
	resolveSecrets(reflect.ValueOf(c).Elem(), dir)
}

func resolvePath(dir, p string) string {
	if p == "" || strings.HasPrefix(p, "$") || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// resolveSecrets rewrites every file: Secret in v, wherever it sits, so a
// secret key added later is covered without being listed here.
func resolveSecrets(v reflect.Value, dir string) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				resolveSecrets(v.Field(i), dir)
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			resolveSecrets(v.Index(i), dir)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			resolveSecrets(v.Elem(), dir)
		}
	case reflect.String:
		if v.Type() != reflect.TypeOf(Secret("")) || !v.CanSet() {
			return
		}
		if p, ok := strings.CutPrefix(v.String(), "file:"); ok {
			v.SetString("file:" + resolvePath(dir, p))
		}
	}
}

// expandPath expands $VAR and ${VAR} in p and fails, naming the variable,
// when one is unset or empty: "file:${CREDENTIALS_DIRECTORY}/x" outside
// systemd must not quietly become "/x".
func expandPath(p string) (string, error) {
	var missing []string
	out := os.Expand(p, func(name string) string {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		hint := ""
		if missing[0] == "CREDENTIALS_DIRECTORY" {
			hint = " (systemd sets it for a unit with LoadCredential=; in a shell, set it to the credentials directory)"
		}
		return "", fmt.Errorf("environment variable %s is not set%s", missing[0], hint)
	}
	return out, nil
}

// hostRE is compiled on first use: its bounded repetitions make a program of
// thousands of instructions, about a millisecond and 140 KB at every start of
// every command when it was a package variable, and only a listen address
// with a host name needs it.
var hostRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
})

// checkListen reports what net.Listen would refuse in a listen address:
// host:port with a port of 0-65535 and a host that is empty (every
// interface), an IP address or a host name.
func checkListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if strings.Contains(host, ":") || !hostRE().MatchString(host) {
		return fmt.Errorf("%q: host %q is neither an IP address nor a host name", addr, host)
	}
	return nil
}

// checkDatabase reports why serve could not open or create the SQLite file
// at path: the file must be writable if it exists, otherwise the nearest
// existing directory above it must let us create it (serve makes missing
// directories). SQLite also writes -wal and -shm files beside it, so the
// directory must be writable either way. Nothing is written: a forensic
// copy's directory stays as it was.
func checkDatabase(path string) error {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory", path)
		}
		if err := writable(path, false); err != nil {
			return fmt.Errorf("the database file is not writable: %w", err)
		}
	} else if !missing(err) {
		return err
	}
	dir := filepath.Dir(path)
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", dir)
			}
			break
		}
		if !missing(err) {
			return err
		}
		up := filepath.Dir(dir)
		if up == dir {
			return fmt.Errorf("no existing directory above %s", path)
		}
		dir = up
	}
	if err := writable(dir, true); err != nil {
		return fmt.Errorf("directory %s is not writable: the database, its -wal and -shm files cannot be created there", dir)
	}
	return sharedDir(dir, dir == filepath.Dir(path))
}

// missing: nothing at the path, or a file where a directory should be (the
// walk up then finds and names it).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// dedupeSecrets reports a secret reference that does not resolve once, at
// its first key path, naming the other places that use it: the same
// missing variable is one thing to fix.
func dedupeSecrets(ps []Problem) []Problem {
	first := map[string]int{}
	also := map[int][]string{}
	out := ps[:0:0]
	for _, p := range ps {
		if !p.Warning && strings.HasPrefix(p.Message, "secret ") {
			if i, ok := first[p.Message]; ok {
				also[i] = append(also[i], p.Path)
				continue
			}
			first[p.Message] = len(out)
		}
		out = append(out, p)
	}
	for i, paths := range also {
		out[i].Message += " (also used at " + strings.Join(paths, ", ") + ")"
	}
	return out
}
