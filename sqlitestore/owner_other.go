//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlitestore

import "os"

// noFollow: no O_NOFOLLOW here.
const noFollow = 0

// tryLock: no flock here; the owner lock always succeeds (one serve per file
// is then the operator's care).
func tryLock(*os.File, bool) (bool, error) { return true, nil }
