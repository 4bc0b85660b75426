package config

import (
	"strings"
	"time"
)

// validateMessaging checks the keys of the messaging platforms (SPEC 11):
// verify_token belongs to meta, whose GET handshake needs it; discord's
// deferred_type is one of the two deferred responses.
func (s *Source) validateMessaging(p string, add func(string, string, ...any)) {
	if s.VerifyToken != "" {
		if s.Scheme != "meta" {
			add(p+".verify_token", "only scheme meta has a verify_token (its GET handshake); scheme is %s", s.Scheme)
		} else if _, err := s.VerifyToken.Resolve(); err != nil {
			add(p+".verify_token", "%v", err)
		}
	}
	if t := s.Discord.DeferredType; t != 0 {
		if s.Scheme != "discord" {
			add(p+".discord.deferred_type", "only scheme discord answers a deferred response; scheme is %s", s.Scheme)
		} else if t != 5 && t != 6 {
			add(p+".discord.deferred_type", "%d: want 5 (a message follows) or 6 (component interactions: the message is updated later)", t)
		}
	}
}

// presetClaims are the claims retentions of the presets that keep claims
// shorter than retention.claims, with no redrive window: Telegram
// re-randomizes update_id after a week without updates, so an older claim
// could swallow a new update as a duplicate (its updates live 24 h at
// most, so nothing it retries is older).
var presetClaims = map[string]time.Duration{"telegram": 7 * Day}

// messagingDefaults applies the presets' claims retention (and their lack
// of a redrive window) where the source sets neither.
func (s *Source) messagingDefaults() {
	if d, ok := presetClaims[s.Scheme]; ok {
		setDur(&s.RetentionClaims, d)
		s.redriveSet = true // 0 unless written
	}
}

// NoteExplicit records the keys of the document (raw, as YAML decoded it)
// whose zero value is meant, not a default: a source's redrive_window: 0.
// Call it before ApplyDefaults.
func (c *Config) NoteExplicit(raw map[string]any) {
	list, _ := raw["sources"].([]any)
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok || i >= len(c.Sources) {
			continue
		}
		for k := range m {
			if strings.EqualFold(k, "redrive_window") {
				c.Sources[i].redriveSet = true
			}
		}
	}
}
