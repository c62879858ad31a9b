package fsm

import (
	"encoding/binary"
	"math"
)

// appendBucketRecord appends r as msgpack, the same value the codec writes
// for it (an array of its fields, StructToArray): bucket records are nearly
// all of a snapshot, and writing them without reflection makes a snapshot of
// a million keys several times cheaper in CPU, which is what requests on the
// same cores notice. TestAppendBucketRecordMatchesTheCodec holds it to the
// codec's bytes.
func appendBucketRecord(b []byte, r *bucketRecord) []byte {
	b = append(b, 0x90|12) // fixarray of the 12 fields
	b = appendMsgpackString(b, r.Key)
	b = appendMsgpackString(b, r.Policy)
	b = appendMsgpackUint(b, uint64(r.Algorithm))
	for _, v := range [...]int64{r.Rate, r.Period, r.Burst, r.At, r.Frac, r.Count, r.Previous} {
		b = appendMsgpackInt(b, v)
	}
	if r.Log == nil {
		b = append(b, 0xc0) // nil
	} else {
		b = appendMsgpackArray(b, len(r.Log))
		for _, v := range r.Log {
			b = appendMsgpackInt(b, v)
		}
	}
	if r.Shares == nil {
		return append(b, 0xc0)
	}
	b = appendMsgpackArray(b, len(r.Shares))
	for _, sh := range r.Shares {
		b = append(b, 0x90|3)
		b = appendMsgpackUint(b, sh.ID)
		b = appendMsgpackInt(b, sh.Units)
		b = appendMsgpackInt(b, sh.Until)
	}
	return b
}

// appendMsgpackArray writes the header of an array of n elements.
func appendMsgpackArray(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= 0xffff:
		b = append(b, 0xdc)
		return binary.BigEndian.AppendUint16(b, uint16(n))
	}
	b = append(b, 0xdd)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

func appendMsgpackString(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= 0xff:
		b = append(b, 0xd9, byte(n))
	case n <= 0xffff:
		b = append(b, 0xda)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0xdb)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
	}
	return append(b, s...)
}

// appendMsgpackInt writes v as the codec writes a signed integer: a
// fixint from -32 to 127, else the narrowest signed form that holds it.
func appendMsgpackInt(b []byte, v int64) []byte {
	switch {
	case v >= -32 && v <= math.MaxInt8:
		return append(b, byte(v))
	case v >= math.MinInt8 && v <= math.MaxInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16 && v <= math.MaxInt16:
		b = append(b, 0xd1)
		return binary.BigEndian.AppendUint16(b, uint16(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		b = append(b, 0xd2)
		return binary.BigEndian.AppendUint32(b, uint32(v))
	}
	b = append(b, 0xd3)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

// appendMsgpackUint writes v as the codec writes an unsigned integer.
func appendMsgpackUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= 0xff:
		return append(b, 0xcc, byte(v))
	case v <= 0xffff:
		b = append(b, 0xcd)
		return binary.BigEndian.AppendUint16(b, uint16(v))
	case v <= 0xffffffff:
		b = append(b, 0xce)
		return binary.BigEndian.AppendUint32(b, uint32(v))
	}
	b = append(b, 0xcf)
	return binary.BigEndian.AppendUint64(b, v)
}
