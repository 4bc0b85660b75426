//go:build !unix

package config

import "os"

// writable opens a file for writing, or creates and removes a probe file in
// a directory, where there is no access(2).
func writable(path string, dir bool) error {
	if !dir {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		return err
	}
	f, err := os.CreateTemp(path, ".hookwarden-check-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// sharedDir: permission bits say nothing of who may write here (Windows
// ACLs); the directory is the operator's care.
func sharedDir(string, bool) error { return nil }
