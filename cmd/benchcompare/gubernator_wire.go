package main

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Gubernator's GetRateLimits messages on the wire (gubernator.proto, package
// pb.gubernator), encoded here with protowire, and gubCodec, the gRPC codec
// that sends them, so that the main module needs none of Gubernator's code.
//
//	GetRateLimitsReq  { repeated RateLimitReq requests = 1; }
//	RateLimitReq      { string name = 1; string unique_key = 2; int64 hits = 3;
//	                    int64 limit = 4; int64 duration = 5; (algorithm = 6,
//	                    behavior = 7: 0, TOKEN_BUCKET and BATCHING, left out) }
//	GetRateLimitsResp { repeated RateLimitResp responses = 1; }
//	RateLimitResp     { Status status = 1; (UNDER_LIMIT 0, OVER_LIMIT 1) ...
//	                    string error = 5; }
const (
	gubFieldRequests  = 1
	gubFieldName      = 1
	gubFieldUniqueKey = 2
	gubFieldHits      = 3
	gubFieldLimit     = 4
	gubFieldDuration  = 5
	gubFieldResponses = 1
	gubFieldStatus    = 1
	gubFieldError     = 5
	gubOverLimit      = 1
)

// gubRequest is a GetRateLimitsReq of one hit of each key.
type gubRequest struct {
	keys       []string
	limit      int64
	durationMs int64
}

// itemSize is the size of key's RateLimitReq, without its own tag and length.
func (q *gubRequest) itemSize(key string) int {
	return protowire.SizeTag(gubFieldName) + protowire.SizeBytes(len(gubName)) +
		protowire.SizeTag(gubFieldUniqueKey) + protowire.SizeBytes(len(key)) +
		protowire.SizeTag(gubFieldHits) + protowire.SizeVarint(1) +
		protowire.SizeTag(gubFieldLimit) + protowire.SizeVarint(uint64(q.limit)) +
		protowire.SizeTag(gubFieldDuration) + protowire.SizeVarint(uint64(q.durationMs))
}

func (q *gubRequest) size() int {
	n := 0
	for _, k := range q.keys {
		n += protowire.SizeTag(gubFieldRequests) + protowire.SizeBytes(q.itemSize(k))
	}
	return n
}

// appendTo appends the encoded message to b.
func (q *gubRequest) appendTo(b []byte) []byte {
	for _, k := range q.keys {
		b = protowire.AppendTag(b, gubFieldRequests, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(q.itemSize(k)))
		b = protowire.AppendTag(b, gubFieldName, protowire.BytesType)
		b = protowire.AppendString(b, gubName)
		b = protowire.AppendTag(b, gubFieldUniqueKey, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, gubFieldHits, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
		b = protowire.AppendTag(b, gubFieldLimit, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(q.limit))
		b = protowire.AppendTag(b, gubFieldDuration, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(q.durationMs))
	}
	return b
}

// gubResponse is a GetRateLimitsResp read into allowed (UNDER_LIMIT), the
// number of responses, and the first error a response carried.
type gubResponse struct {
	allowed []bool
	n       int
	err     string
}

func (p *gubResponse) decode(data []byte) error {
	return eachField(data, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != gubFieldResponses || typ != protowire.BytesType {
			return nil
		}
		status, errText, err := gubParseResp(v)
		if err != nil {
			return err
		}
		if p.n < len(p.allowed) {
			p.allowed[p.n] = status != gubOverLimit && errText == ""
		}
		if errText != "" && p.err == "" {
			p.err = errText
		}
		p.n++
		return nil
	})
}

// gubCodec is the gRPC codec of gubRequest and gubResponse, named "proto"
// as gRPC's default: it is protobuf on the wire.
type gubCodec struct{}

var _ encoding.CodecV2 = gubCodec{}

func (gubCodec) Name() string { return "proto" }

func (gubCodec) Marshal(v any) (mem.BufferSlice, error) {
	q, ok := v.(*gubRequest)
	if !ok {
		return nil, fmt.Errorf("gubernator codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(q.appendTo(make([]byte, 0, q.size())))}, nil
}

func (gubCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*gubResponse)
	if !ok {
		return fmt.Errorf("gubernator codec: cannot unmarshal into %T", v)
	}
	return p.decode(data.Materialize())
}

// gubParseResp reads a RateLimitResp's status and error.
func gubParseResp(data []byte) (status uint64, errText string, err error) {
	err = eachField(data, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == gubFieldStatus && typ == protowire.VarintType:
			s, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return protowire.ParseError(n)
			}
			status = s
		case num == gubFieldError && typ == protowire.BytesType:
			errText = string(v)
		}
		return nil
	})
	return status, errText, err
}

// eachField calls fn with each field of a message: its number, type and
// value (a varint's bytes, or a length-delimited field's contents).
func eachField(data []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return protowire.ParseError(n)
		}
		data = data[n:]
		m := protowire.ConsumeFieldValue(num, typ, data)
		if m < 0 {
			return protowire.ParseError(m)
		}
		v := data[:m]
		if typ == protowire.BytesType {
			b, k := protowire.ConsumeBytes(v)
			if k < 0 {
				return protowire.ParseError(k)
			}
			v = b
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		data = data[m:]
	}
	return nil
}
