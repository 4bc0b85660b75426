//go:build race

package torture

func init() { raceEnabled = true }
