package config

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
