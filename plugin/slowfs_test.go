package main

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// storage is slow or hung storage, the way a network file system is: a
// FUSE file system, served by the test, over a directory of the test's,
// whose writes go at a given rate, or (hung) block until the test ends.
// Reads and metadata are not slowed.
type storage struct {
	mnt  string
	rate int // bytes per second; 0: hung once hangAfter bytes are written

	mu        sync.Mutex
	written   int
	hangAfter int
	release   chan struct{} // closed at cleanup: hung writes return
}

// mountStorage mounts slow storage and returns it; it skips the test where
// FUSE cannot be mounted (no /dev/fuse, not root and no fusermount).
func mountStorage(t *testing.T, rate, hangAfter int) *storage {
	t.Helper()
	s := &storage{mnt: t.TempDir(), rate: rate, hangAfter: hangAfter, release: make(chan struct{})}
	under := t.TempDir()
	var st syscall.Stat_t
	if err := syscall.Stat(under, &st); err != nil {
		t.Fatal(err)
	}
	root := &fs.LoopbackRoot{Path: under, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &slowNode{LoopbackNode: fs.LoopbackNode{RootData: r}, s: s}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	srv, err := fs.Mount(s.mnt, root.RootNode, &fs.Options{MountOptions: fuse.MountOptions{DirectMount: true, Name: "slowfs"}})
	if err != nil {
		t.Skipf("FUSE not available (%v): slow storage cannot be made", err)
	}
	t.Cleanup(func() {
		close(s.release)
		srv.Unmount()
	})
	return s
}

// wait takes as long as writing n bytes takes on this storage.
func (s *storage) wait(ctx context.Context, n int) {
	s.mu.Lock()
	s.written += n
	hang := s.rate == 0 && s.written > s.hangAfter
	s.mu.Unlock()
	if hang {
		select {
		case <-s.release:
		case <-ctx.Done(): // the writer was killed
		}
		return
	}
	if s.rate > 0 {
		select {
		case <-time.After(time.Duration(n) * time.Second / time.Duration(s.rate)):
		case <-ctx.Done():
		}
	}
}

type slowNode struct {
	fs.LoopbackNode
	s *storage
}

func (n *slowNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno == 0 {
		fh = &slowFile{fh.(*fs.LoopbackFile), n.s}
	}
	return in, fh, fl, errno
}

func (n *slowNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno == 0 {
		fh = &slowFile{fh.(*fs.LoopbackFile), n.s}
	}
	return fh, fl, errno
}

type slowFile struct {
	*fs.LoopbackFile
	s *storage
}

func (f *slowFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.s.wait(ctx, len(data))
	return f.LoopbackFile.Write(ctx, data, off)
}

// PassthroughFd refuses kernel passthrough, which would bypass Write.
func (f *slowFile) PassthroughFd() (int, bool) { return -1, false }
