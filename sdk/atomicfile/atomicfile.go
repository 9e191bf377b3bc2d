// Package atomicfile replaces files so that a reader, or a crash, never
// leaves half a file: the data goes to a temporary file beside the target
// with its final mode set before any byte is written (a key is never
// readable by others, not even briefly), is synced, and is renamed over the
// target; the directory is synced so the rename survives a power loss.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data, created with mode.
func Write(path string, data []byte, mode os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
