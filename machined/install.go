package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/bootmedium"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/install"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/server"
	"github.com/cairn-os/cairn/machined/internal/workload"
)

// installer is the machine API's view of installing (server.Installer): it finds the live medium, has the
// disk written under the sequence lock and reboots through the node.
type installer struct {
	inst    *install.Installer
	node    *node.Node
	payload workload.Payload // mounting it mounts the ISO on mediumDir when the node booted from one
	version string
	bus     *events.Bus
}

func (x *installer) event(outcome, msg string) {
	x.bus.Publish(events.Event{Kind: events.KindInstall, Outcome: outcome, Message: msg})
}

func (x *installer) Install(ctx context.Context, o server.InstallOptions, progress func(string)) error {
	req := install.Request{Disk: o.Disk, Wipe: o.Wipe}
	if c := x.node.Machine(); req.Disk.IsZero() && c != nil {
		req = install.Request{Disk: c.Machine.Install.Disk, Wipe: o.Wipe || c.Machine.Install.Wipe}
	}
	file, err := x.payloadFile(ctx, progress)
	if err != nil {
		return err
	}
	recs, err := bootmedium.ReadRecords(payload.SumFile)
	if err != nil {
		return err
	}
	// The build records an encoding of the payload for each kind of medium; the install copies the
	// medium's, so it is checked against the record of that one.
	rec, err := mediumRecord(file, recs)
	if err != nil {
		return &install.Refusal{Err: err}
	}
	src := install.Source{Dir: mediumDir, Version: x.version, Payload: rec.Sum, PayloadFile: file}
	var d inventory.Disk
	err = x.node.Installing(ctx, func(ctx context.Context) error {
		d, err = x.inst.Install(ctx, src, req, progress)
		return err
	})
	if err != nil {
		x.event("failed", fmt.Sprintf("install of Cairn %s: %v", x.version, err))
		return err
	}
	msg := fmt.Sprintf("Cairn %s installed on %s", x.version, d.Describe())
	x.event("done", msg)
	if o.NoReboot {
		progress(msg + ": it boots from there at the next reboot, once the firmware prefers it to the live medium")
		return nil
	}
	progress(msg + ": rebooting from it")
	return x.node.InstallReboot(ctx)
}

// payloadFile is the payload image the install copies: the ISO's image file, or the image its stream was
// unpacked into (payload.ISOStream). The payload search mounts the ISO it found the payload on (on a
// disk-booted node it finds a slot); a node in maintenance may not have searched yet, or may not have
// unpacked the ISO's stream, which the search then does (into memory: maintenance mounts no volume).
func (x *installer) payloadFile(ctx context.Context, progress func(string)) (string, error) {
	image := filepath.Join(mediumDir, payload.ISOFile)
	if _, err := os.Stat(image); err == nil {
		return image, nil
	}
	unpacked := func() string { return "" }
	if x.payload.Unpacked != nil { // nil in sandbox mode
		unpacked = x.payload.Unpacked
	}
	if unpacked() == "" {
		progress("mounting the boot medium's payload (the ISO's stream is unpacked first; on a node never inited, into memory)")
	}
	if err := x.payload.Mount(ctx); err != nil {
		return "", &install.Refusal{Err: fmt.Errorf("the boot medium's payload is not mounted, so there is nothing to install from: %w", err)}
	}
	if f := unpacked(); f != "" {
		return f, nil
	}
	return image, nil // on the ISO, or not there: the install refuses a medium without it
}

// mediumRecord is the record of the ISO's payload image file: the one whose dm-verity tree it carries. A
// medium without the file gets the first record: the installer refuses it, saying what it lacks.
func mediumRecord(file string, recs payload.Records) (payload.Record, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return recs[0], nil
	}
	if err != nil {
		return payload.Record{}, fmt.Errorf("the boot medium's payload: %w", err)
	}
	defer f.Close()
	rec, why := bootmedium.Identify(f, recs)
	if why != "" {
		return payload.Record{}, fmt.Errorf("the boot medium's %s %s", file, why)
	}
	return rec, nil
}
