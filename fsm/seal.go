package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// An entry is sealed: a marker byte, the CRC-32C of the command, then the
// command ([type][msgpack body]). A byte changed on a disk (or in transit
// below Raft) no longer replays as a different command: the FSM refuses the
// entry, changes nothing, and reports the damage (Damaged), so that the node
// says it is not ready instead of diverging silently from the others.
// Entries written before sealing (no marker) are applied as they are.

// sealMarker starts a sealed entry; no command type uses it.
const sealMarker = 0xFE

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errDamaged is an entry whose checksum does not match its content.
var errDamaged = errors.New("the entry's checksum does not match its content")

// seal wraps a command in the sealed form.
func seal(command []byte) []byte {
	out := make([]byte, 5, 5+len(command))
	out[0] = sealMarker
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(command, castagnoli))
	return append(out, command...)
}

// unseal returns the command of a sealed entry, or an unsealed entry as it
// is. A sealed entry whose checksum fails is errDamaged.
func unseal(data []byte) ([]byte, error) {
	if len(data) == 0 || data[0] != sealMarker {
		return data, nil
	}
	if len(data) < 5 {
		return nil, fmt.Errorf("%w: %d bytes", errDamaged, len(data))
	}
	command := data[5:]
	if crc32.Checksum(command, castagnoli) != binary.BigEndian.Uint32(data[1:5]) {
		return nil, errDamaged
	}
	return command, nil
}
