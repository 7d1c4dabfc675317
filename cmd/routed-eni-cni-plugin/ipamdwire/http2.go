package ipamdwire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2/hpack"
)

// HTTP/2 (RFC 9113) as a client of one stream needs it.
const (
	clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingEnablePush        = 0x2
	settingInitialWindowSize = 0x4
	settingMaxFrameSize      = 0x5

	defaultWindow   = 65535
	defaultMaxFrame = 16384

	errCodeRefusedStream = 0x7
	errCodeCancel        = 0x8

	streamID = 1 // the only stream of a connection
)

// stream is a connection carrying one unary call.
type stream struct {
	r   *bufio.Reader
	w   *bufio.Writer
	dec *hpack.Decoder

	// Send side: the server's windows and frame size limit.
	connWindow, streamWindow, initialWindow int64
	maxFrame                                int

	// Receive side.
	fields   map[string]string // response headers and trailers
	body     []byte
	block    []byte // header block being assembled
	endAfter bool   // the HEADERS frame of block ends the stream
	ended    bool
	goneAway bool
	hdr      [9]byte
	scratch  []byte
}

func newStream(nc net.Conn) *stream {
	s := &stream{
		r:             bufio.NewReaderSize(nc, 4096),
		w:             bufio.NewWriterSize(nc, 4096),
		connWindow:    defaultWindow,
		streamWindow:  defaultWindow,
		initialWindow: defaultWindow,
		maxFrame:      defaultMaxFrame,
		fields:        map[string]string{},
	}
	s.dec = hpack.NewDecoder(4096, nil)
	return s
}

func (s *stream) writeFrame(typ, flags byte, stream uint32, p []byte) {
	h := [9]byte{byte(len(p) >> 16), byte(len(p) >> 8), byte(len(p)), typ, flags}
	binary.BigEndian.PutUint32(h[5:], stream)
	_, _ = s.w.Write(h[:])
	_, _ = s.w.Write(p)
}

// unary sends the request message and returns the reply message.
func (s *stream) unary(method string, req []byte, timeout time.Duration) ([]byte, error) {
	_, _ = s.w.WriteString(clientPreface)
	s.writeFrame(frameSettings, 0, 0, []byte{0, settingEnablePush, 0, 0, 0, 0})
	var hb strings.Builder
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method},
		{Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
		{Name: "grpc-timeout", Value: grpcTimeout(timeout)},
	} {
		if err := enc.WriteField(f); err != nil {
			return nil, err
		}
	}
	s.writeFrame(frameHeaders, flagEndHeaders, streamID, []byte(hb.String()))

	// The message: uncompressed flag, length, bytes; in DATA frames the
	// server's windows and frame size allow.
	msg := make([]byte, 5+len(req))
	binary.BigEndian.PutUint32(msg[1:], uint32(len(req)))
	copy(msg[5:], req)
	for len(msg) > 0 && !s.ended {
		n := min(int64(len(msg)), int64(s.maxFrame), s.connWindow, s.streamWindow)
		if n <= 0 {
			if err := s.w.Flush(); err != nil {
				return nil, err
			}
			if err := s.readFrame(); err != nil {
				return nil, err
			}
			continue
		}
		flags := byte(0)
		if int(n) == len(msg) {
			flags = flagEndStream
		}
		s.writeFrame(frameData, flags, streamID, msg[:n])
		msg = msg[n:]
		s.connWindow -= n
		s.streamWindow -= n
	}
	if err := s.w.Flush(); err != nil {
		return nil, err
	}
	for !s.ended {
		if err := s.readFrame(); err != nil {
			return nil, err
		}
	}
	return s.result()
}

// readFrame reads and handles one frame from the server.
func (s *stream) readFrame() error {
	if _, err := io.ReadFull(s.r, s.hdr[:]); err != nil {
		if s.goneAway && err == io.EOF {
			return &Error{Code: Unavailable, Message: "server closed the connection (GOAWAY)"}
		}
		return err
	}
	n := int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
	typ, flags := s.hdr[3], s.hdr[4]
	id := binary.BigEndian.Uint32(s.hdr[5:]) & 0x7fffffff
	if n > defaultMaxFrame {
		return &Error{Code: Internal, Message: fmt.Sprintf("frame of %d bytes exceeds the advertised maximum", n)}
	}
	if cap(s.scratch) < n {
		s.scratch = make([]byte, n)
	}
	p := s.scratch[:n]
	if _, err := io.ReadFull(s.r, p); err != nil {
		return err
	}
	switch typ {
	case frameSettings:
		if flags&flagAck != 0 {
			return nil
		}
		if err := s.applySettings(p); err != nil {
			return err
		}
		s.writeFrame(frameSettings, flagAck, 0, nil)
		return s.w.Flush()
	case framePing:
		if flags&flagAck != 0 {
			return nil
		}
		s.writeFrame(framePing, flagAck, 0, p)
		return s.w.Flush()
	case frameWindowUpdate:
		if len(p) != 4 {
			return &Error{Code: Internal, Message: "malformed WINDOW_UPDATE"}
		}
		inc := int64(binary.BigEndian.Uint32(p) & 0x7fffffff)
		switch id {
		case 0:
			s.connWindow += inc
		case streamID:
			s.streamWindow += inc
		}
		return nil
	case frameGoAway:
		if len(p) < 8 {
			return &Error{Code: Internal, Message: "malformed GOAWAY"}
		}
		s.goneAway = true
		if last := binary.BigEndian.Uint32(p) & 0x7fffffff; last < streamID {
			return &Error{Code: Unavailable, Message: "server refused the call (GOAWAY)"}
		}
		return nil // the server finishes our stream first
	case frameRSTStream:
		if id != streamID || len(p) != 4 {
			return nil
		}
		switch code := binary.BigEndian.Uint32(p); code {
		case errCodeRefusedStream:
			return &Error{Code: Unavailable, Message: "stream refused by the server"}
		case errCodeCancel:
			return &Error{Code: Canceled, Message: "stream cancelled by the server"}
		default:
			return &Error{Code: Internal, Message: fmt.Sprintf("stream reset by the server (HTTP/2 error %d)", code)}
		}
	case frameData:
		if id != streamID {
			return nil
		}
		data, err := unpad(p, flags)
		if err != nil {
			return err
		}
		if len(s.body)+len(data) > maxReply+5 {
			return &Error{Code: ResourceExhausted, Message: fmt.Sprintf("reply larger than %d bytes", maxReply)}
		}
		s.body = append(s.body, data...)
		s.ended = flags&flagEndStream != 0
		if n > 0 && !s.ended {
			// Give the window back at once: replies are small, and
			// one larger than the window must not stall.
			var inc [4]byte
			binary.BigEndian.PutUint32(inc[:], uint32(n))
			s.writeFrame(frameWindowUpdate, 0, 0, inc[:])
			s.writeFrame(frameWindowUpdate, 0, streamID, inc[:])
			return s.w.Flush()
		}
		return nil
	case frameHeaders:
		if id != streamID {
			return nil
		}
		frag, err := unpad(p, flags)
		if err != nil {
			return err
		}
		if flags&flagPriority != 0 {
			if len(frag) < 5 {
				return &Error{Code: Internal, Message: "malformed HEADERS"}
			}
			frag = frag[5:]
		}
		s.block = append(s.block[:0], frag...)
		s.endAfter = flags&flagEndStream != 0
		if flags&flagEndHeaders != 0 {
			return s.headerBlockDone()
		}
		return nil
	case frameContinuation:
		if id != streamID {
			return nil
		}
		s.block = append(s.block, p...)
		if flags&flagEndHeaders != 0 {
			return s.headerBlockDone()
		}
		return nil
	}
	return nil // PRIORITY and unknown frame types are ignored
}

func (s *stream) applySettings(p []byte) error {
	if len(p)%6 != 0 {
		return &Error{Code: Internal, Message: "malformed SETTINGS"}
	}
	for ; len(p) > 0; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:6])
		switch binary.BigEndian.Uint16(p[:2]) {
		case settingInitialWindowSize:
			// A new initial window moves the open stream's window by
			// the difference.
			s.streamWindow += int64(v) - s.initialWindow
			s.initialWindow = int64(v)
		case settingMaxFrameSize:
			if v >= defaultMaxFrame {
				// A frame's length has 24 bits (RFC 9113 allows no more).
				s.maxFrame = int(min(v, 1<<24-1))
			}
		}
	}
	return nil
}

func (s *stream) headerBlockDone() error {
	fs, err := s.dec.DecodeFull(s.block)
	if err != nil {
		return &Error{Code: Internal, Message: "malformed header block: " + err.Error()}
	}
	for _, f := range fs {
		s.fields[f.Name] = f.Value
	}
	s.block = s.block[:0]
	if s.endAfter {
		s.ended = true
	}
	return nil
}

// unpad strips the padding of a DATA or HEADERS frame.
func unpad(p []byte, flags byte) ([]byte, error) {
	if flags&flagPadded == 0 {
		return p, nil
	}
	if len(p) < 1 || int(p[0]) > len(p)-1 {
		return nil, &Error{Code: Internal, Message: "malformed padding"}
	}
	return p[1 : len(p)-int(p[0])], nil
}

// result turns the finished stream into the reply message or an error.
func (s *stream) result() ([]byte, error) {
	if st := s.fields[":status"]; st != "200" {
		return nil, &Error{Code: httpStatusCode(st), Message: "unexpected HTTP status code received from server: " + st}
	}
	gs, ok := s.fields["grpc-status"]
	if !ok {
		return nil, &Error{Code: Internal, Message: "server closed the stream without sending trailers"}
	}
	code, err := strconv.ParseUint(gs, 10, 32)
	if err != nil {
		return nil, &Error{Code: Internal, Message: "malformed grpc-status " + strconv.Quote(gs)}
	}
	if code != 0 {
		return nil, &Error{Code: Code(code), Message: decodeMessage(s.fields["grpc-message"])}
	}
	b := s.body
	if len(b) < 5 {
		return nil, &Error{Code: Internal, Message: "reply without a message"}
	}
	if b[0] != 0 {
		return nil, &Error{Code: Internal, Message: "compressed reply (no compression was offered)"}
	}
	if n := binary.BigEndian.Uint32(b[1:5]); int(n) != len(b)-5 {
		return nil, &Error{Code: Internal, Message: fmt.Sprintf("reply message of %d bytes announced, %d received", n, len(b)-5)}
	}
	return b[5:], nil
}

// grpcTimeout is the grpc-timeout header value (at most 8 digits).
func grpcTimeout(d time.Duration) string {
	ms := max(d.Milliseconds(), 1)
	if ms <= 99999999 {
		return strconv.FormatInt(ms, 10) + "m"
	}
	return strconv.FormatInt(min(int64(d/time.Second), 99999999), 10) + "S"
}

// decodeMessage undoes grpc-message's percent-encoding; a malformed escape
// is kept as it is.
func decodeMessage(m string) string {
	if !strings.Contains(m, "%") {
		return m
	}
	var b strings.Builder
	for i := 0; i < len(m); i++ {
		if m[i] == '%' && i+2 < len(m) {
			if v, err := strconv.ParseUint(m[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(m[i])
	}
	return b.String()
}
