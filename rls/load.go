package rls

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxFileBytes bounds one configuration file.
const MaxFileBytes = 16 << 20

// Load reads the configuration at path: one YAML file, or a directory
// whose files are each one domain. In a directory it reads, as the
// reference's runtime loader does with RUNTIME_IGNOREDOTFILES, every file
// whose name does not start with a dot, whatever its extension, in
// subdirectories too (in lexical order), and skips entries whose name
// starts with a dot. So a Kubernetes ConfigMap mount, whose visible files
// are symlinks into the "..data" directory, loads each file once. Symlinks
// to files are followed; a symlink to a directory is not descended into.
//
// An invalid file fails the load with an *Error (wrapping
// ErrInvalidConfig); an unreadable path with the I/O error.
func Load(path string, opt Options) (*Config, error) {
	files, err := readFiles(path)
	if err != nil {
		return nil, err
	}
	return Parse(files, opt)
}

// readFiles reads the files Load loads.
func readFiles(path string) ([]File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	if !st.IsDir() {
		data, err := readFile(path)
		if err != nil {
			return nil, err
		}
		return []File{{Name: path, Data: data}}, nil
	}
	// Walk the directory the path names (it may be a symlink to one, the
	// reference's swapped RUNTIME_ROOT); files are named under path.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	var files []File
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("rls: %w", err)
		}
		if p == real {
			return nil
		}
		if skip, err := skipDotfile(d); skip {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				return nil // not descended into, as filepath.Walk does not
			}
		}
		data, err := readFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(real, p)
		if err != nil {
			return fmt.Errorf("rls: %w", err)
		}
		files = append(files, File{Name: filepath.Join(path, rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// readFile reads one file, refusing one larger than MaxFileBytes.
func readFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	if len(data) > MaxFileBytes {
		return nil, &Error{File: p, Msg: fmt.Sprintf("larger than %d bytes", MaxFileBytes)}
	}
	return data, nil
}

// skipDotfile reports whether d is a dotfile or a dot directory, which
// the loader skips (as the reference's RUNTIME_IGNOREDOTFILES), and what
// a WalkDir function returns to skip it.
func skipDotfile(d fs.DirEntry) (bool, error) {
	if !strings.HasPrefix(d.Name(), ".") {
		return false, nil
	}
	if d.IsDir() {
		return true, filepath.SkipDir
	}
	return true, nil
}
