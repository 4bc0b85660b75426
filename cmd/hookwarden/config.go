package main

// This is the only file that knows viper: it finds the file, reads YAML,
// applies HOOKWARDEN_* environment overrides and decodes into config.Config.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/hookwarden/hookwarden/internal/config"
)

// configSearch is where a config file is looked for when --config is not given.
var configSearch = []string{"./config.yaml", "/etc/hookwarden/config.yaml"}

// findConfig resolves the config path: --config, $HOOKWARDEN_CONFIG, then the
// search list.
func findConfig(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("HOOKWARDEN_CONFIG"); env != "" {
		return env, nil
	}
	for _, p := range configSearch {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", usageErrorf("no configuration file: pass --config PATH, set HOOKWARDEN_CONFIG, or create %s "+
		"(start from config.example.yaml; `make run` uses a built-in demo)", strings.Join(configSearch, " or "))
}

// loadConfigFile reads and validates the file at path. Relative paths in it
// (database.path, file: secrets, tls) are taken from the file's directory,
// so a command run from elsewhere finds the same database.
func loadConfigFile(path string) (*config.Config, []config.Problem, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, usageErrorf("read configuration: %v", err)
	}
	return loadConfigIn(b, path, filepath.Dir(path))
}

// loadConfig is loadConfigIn with relative paths left relative to the
// current directory (the built-in demo, tests of a document).
func loadConfig(doc []byte, name string) (*config.Config, []config.Problem, error) {
	return loadConfigIn(doc, name, "")
}

// loadConfigIn decodes YAML, applies environment overrides and defaults,
// resolves relative paths against dir (unless empty), and returns every
// problem found (warnings included). err is set only when the document
// cannot be read at all; callers decide what problems mean.
func loadConfigIn(doc []byte, name, dir string) (*config.Config, []config.Problem, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(doc, &raw); err != nil {
		return nil, nil, usageErrorf("%s: not valid YAML: %v", name, err)
	}
	problems := config.UnknownKeys(raw)

	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(doc)); err != nil {
		return nil, nil, usageErrorf("%s: %v", name, err)
	}
	v.SetEnvPrefix("HOOKWARDEN")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	// viper only sees environment variables for keys it was told about.
	for _, key := range scalarKeys(reflect.TypeOf(config.Config{}), "") {
		_ = v.BindEnv(key)
	}

	var cfg config.Config
	err := v.Unmarshal(&cfg, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		durationHook, mapstructure.TextUnmarshallerHookFunc(), mapstructure.StringToSliceHookFunc(","))))
	if err != nil {
		// mapstructure decodes every field it can: keep validating the rest
		// so one run of check reports every problem.
		problems = append(problems, decodeProblems(err)...)
	}
	restoreEnvCase(&cfg, raw)
	problems = append(problems, secretOverrides(raw)...)
	cfg.NoteExplicit(raw)
	cfg.ApplyDefaults()
	if dir != "" {
		cfg.ResolvePaths(dir)
	}
	problems = append(problems, cfg.Validate()...)
	return &cfg, problems, nil
}

// durationHook refuses bare numbers for durations: "timeout: 10" would
// otherwise silently mean 10 nanoseconds.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(config.Duration(0)) {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
		return data, nil
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Float32, reflect.Uint, reflect.Uint64:
		if reflect.ValueOf(data).IsZero() {
			return "0s", nil // zero needs no unit (redrive_window: 0)
		}
	}
	switch from.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Float32, reflect.Uint, reflect.Uint64:
		return nil, fmt.Errorf("duration %v has no unit: write e.g. %vs, %vm or %vd", data, data, data, data)
	}
	return data, nil
}

// decodeProblems turns mapstructure's errors into problems with paths. The
// decoder keeps going after a bad field and joins what it found under one
// wrapping error, so every leaf is walked: stopping at the first DecodeError
// would report one problem per run.
func decodeProblems(err error) []config.Problem {
	var ps []config.Problem
	var walk func(error)
	walk = func(e error) {
		if de, ok := e.(*mapstructure.DecodeError); ok {
			if _, joined := de.Unwrap().(interface{ Unwrap() []error }); !joined {
				ps = append(ps, config.Problem{Path: de.Name(), Message: decodeMessage(de.Unwrap())})
				return
			}
		}
		switch x := e.(type) {
		case interface{ Unwrap() []error }:
			for _, y := range x.Unwrap() {
				walk(y)
			}
		case interface{ Unwrap() error }:
			if inner := x.Unwrap(); inner != nil {
				walk(inner)
				return
			}
			ps = append(ps, config.Problem{Path: "(document)", Message: e.Error()})
		default:
			ps = append(ps, config.Problem{Path: "(document)", Message: e.Error()})
		}
	}
	walk(err)
	return ps
}

// decodeMessage says what was wrong with a value in words a YAML author
// uses, with the value itself: "ten" is not a whole number.
func decodeMessage(err error) string {
	var pe *mapstructure.ParseError
	if errors.As(err, &pe) && pe.Expected.IsValid() {
		want := pe.Expected.Type().String()
		switch pe.Expected.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			want = "a whole number"
		case reflect.Float32, reflect.Float64:
			want = "a number"
		case reflect.Bool:
			want = "true or false"
		}
		return fmt.Sprintf("%q: want %s", fmt.Sprint(pe.Value), want)
	}
	return err.Error()
}

// scalarKeys lists the dotted paths of every non-list key, for env binding.
// Keys inside lists (sources, destinations) cannot be overridden this way;
// use env: or file: secret references there.
func scalarKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		if tag == "" {
			continue
		}
		p := prefix + tag
		switch f.Type.Kind() {
		case reflect.Struct:
			keys = append(keys, scalarKeys(f.Type, p+".")...)
		case reflect.Slice, reflect.Map:
		default:
			keys = append(keys, p)
		}
	}
	return keys
}

// restoreEnvCase puts back the case of destination env names, which viper
// folds to lower case ("PATH" must stay "PATH").
func restoreEnvCase(cfg *config.Config, raw map[string]any) {
	srcs, _ := raw["sources"].([]any)
	for i := range cfg.Sources {
		if i >= len(srcs) {
			return
		}
		s, _ := srcs[i].(map[string]any)
		dests, _ := s["destinations"].([]any)
		for j := range cfg.Sources[i].Destinations {
			if j >= len(dests) {
				break
			}
			d, _ := dests[j].(map[string]any)
			env, ok := d["env"].(map[string]any)
			if !ok {
				continue
			}
			m := make(map[string]string, len(env))
			for k, v := range env {
				m[k] = fmt.Sprint(v)
			}
			cfg.Sources[i].Destinations[j].Env = m
		}
	}
}

// secretOverrides warns when an environment variable replaces a secret the
// file sets otherwise: HOOKWARDEN_ADMIN_TOKEN is both the variable
// config.example.yaml references and the override of admin.token, so an
// exported one silently wins over the file's own reference. The value is
// validated either way (a short token on a non-loopback admin.listen is an
// error whatever its origin); the warning says where it came from.
func secretOverrides(raw map[string]any) []config.Problem {
	var ps []config.Problem
	for _, key := range []string{"admin.token", "database.url"} {
		env := "HOOKWARDEN_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		if v, ok := os.LookupEnv(env); !ok || v == "" {
			continue
		}
		section, name, _ := strings.Cut(key, ".")
		m, _ := raw[section].(map[string]any)
		file, set := m[name]
		if !set || file == "env:"+env {
			continue // nothing replaced, or the file asks for that variable
		}
		ps = append(ps, config.Problem{Path: key, Warning: true, Message: fmt.Sprintf(
			"the environment variable %s replaces the file's value (the file's is not used; unset %s to use it)", env, env)})
	}
	return ps
}
