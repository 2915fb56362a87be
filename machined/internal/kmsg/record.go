// Package kmsg reads the kernel's log from /dev/kmsg for the Dmesg RPC: the records kept in the kernel's
// ring buffer, then, when following, each new one, with wall-clock times.
package kmsg

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Record is one kernel log record. /dev/kmsg hands out one per read:
//
//	PRIORITY,SEQUENCE,MICROSECONDS,FLAGS[,...];MESSAGE
//	 KEY=VALUE
//
// where PRIORITY is facility*8+level, MICROSECONDS counts from boot, and lines that start with a space
// carry the record's dictionary (SUBSYSTEM=, DEVICE=), which we drop.
type Record struct {
	Facility int
	Level    int
	Seq      uint64
	Since    time.Duration // since boot
	Message  string
}

// Parse reads one record.
func Parse(rec string) (Record, error) {
	head, rest, ok := strings.Cut(rec, ";")
	if !ok {
		return Record{}, fmt.Errorf("kernel log record %q: no ';' after the header", clip(rec))
	}
	f := strings.Split(head, ",")
	if len(f) < 4 {
		return Record{}, fmt.Errorf("kernel log record %q: header has %d fields, want PRIORITY,SEQUENCE,MICROSECONDS,FLAGS", clip(rec), len(f))
	}
	prio, err := strconv.Atoi(f[0])
	if err != nil || prio < 0 {
		return Record{}, fmt.Errorf("kernel log record %q: priority %q", clip(rec), f[0])
	}
	seq, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return Record{}, fmt.Errorf("kernel log record %q: sequence %q", clip(rec), f[1])
	}
	usec, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || usec < 0 {
		return Record{}, fmt.Errorf("kernel log record %q: timestamp %q", clip(rec), f[2])
	}
	msg, _, _ := strings.Cut(rest, "\n")
	return Record{Facility: prio >> 3, Level: prio & 7, Seq: seq, Since: time.Duration(usec) * time.Microsecond,
		Message: unescape(msg)}, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// unescape undoes the kernel's \xNN escapes for bytes that print (text in other scripts, a backslash) and
// keeps control characters escaped; the result is valid UTF-8, as an API string must be.
func unescape(s string) string {
	if !strings.Contains(s, `\x`) {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil && v >= 0x20 && v != 0x7f {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	out := b.String()
	if !utf8.ValidString(out) {
		out = strings.ToValidUTF8(out, "\uFFFD")
	}
	return out
}

var levels = [8]string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

var facilities = map[int]string{0: "kern", 1: "user", 2: "mail", 3: "daemon", 4: "auth", 5: "syslog", 6: "lpr",
	7: "news", 8: "uucp", 9: "cron", 10: "authpriv", 11: "ftp"}

// Line is the record as one line: "kern.info: message", like dmesg's --decode.
func (r Record) Line() string {
	fac, ok := facilities[r.Facility]
	if !ok {
		fac = "local" + strconv.Itoa(r.Facility-16)
		if r.Facility < 16 || r.Facility > 23 {
			fac = "facility" + strconv.Itoa(r.Facility)
		}
	}
	return fac + "." + levels[r.Level&7] + ": " + r.Message
}
