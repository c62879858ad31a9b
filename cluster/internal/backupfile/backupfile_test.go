package backupfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

func mustBackupBytes(t *testing.T) ([]byte, contract.BackupInfo) {
	t.Helper()
	index, state := fsm.New(slog.New(slog.DiscardHandler)).Backup()
	info := contract.BackupInfo{Index: index, LimitsDigest: state.LimitsDigest(), ClusterID: "0123456789abcdef"}
	var buf bytes.Buffer
	if err := New(info, state).Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), info
}

func mustSpool(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestABackupIsCheckedWholeBeforeUse: a file as written reads back with
// its header, and one truncated, damaged or of another format is a
// *contract.Error.
func TestABackupIsCheckedWholeBeforeUse(t *testing.T) {
	file, info := mustBackupBytes(t)
	damaged := bytes.Clone(file)
	damaged[backupHeaderBytes] ^= 0xff
	tests := []struct {
		name string
		file []byte
		ok   bool
	}{
		{"a file as written is read", file, true},
		{"a truncated file is refused", file[:len(file)-1], false},
		{"a damaged file is refused", damaged, false},
		{"another format is refused", []byte("PK\x03\x04 not a backup at all, clearly not one"), false},
		{"an empty file is refused", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame, err := Check(bytes.NewReader(tt.file), mustSpool(t))
			if !tt.ok {
				var refused *contract.Error
				if !errors.As(err, &refused) {
					t.Fatalf("Check: %v, want a *contract.Error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if frame.Info != info || frame.Offset != backupHeaderBytes || frame.Offset+frame.Bytes+backupTrailerBytes != int64(len(file)) {
				t.Fatalf("frame %+v, want info %+v and the state between header and trailer", frame, info)
			}
		})
	}
}

// TestAVersion1BackupIsRead: files written before the cluster field (a
// version 1 header) still read, with no cluster ID.
func TestAVersion1BackupIsRead(t *testing.T) {
	v2, info := mustBackupBytes(t)
	state := v2[backupHeaderBytes : len(v2)-backupTrailerBytes+8] // the state and its length
	v1 := append(bytes.Clone(v2[:headerBytesOf(1)]), state...)
	binary.BigEndian.PutUint32(v1[8:12], 1)
	sum := sha256.Sum256(v1)
	v1 = append(v1, sum[:]...)
	frame, err := Check(bytes.NewReader(v1), mustSpool(t))
	if err != nil {
		t.Fatal(err)
	}
	info.ClusterID = ""
	if frame.Info != info || frame.Offset != headerBytesOf(1) {
		t.Fatalf("frame %+v, want info %+v and a version 1 header", frame, info)
	}
}
