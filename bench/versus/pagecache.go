package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// fillPageCache writes a file of MemAvailable minus keepFree bytes into dir, syncs it and
// leaves it in place (it goes with the temp directory), so that the page cache is full of
// clean pages. On a VM whose balloon driver reports free pages to the host
// (virtio_balloon free page reporting), the first write into a guest page the host took
// back costs ~2.5 s of system CPU per GB, against ~0.3 s/GB into a recycled page cache
// page; a broker in steady state writes into recycled pages, so with the page cache full
// the CPU-per-GB figures measure the broker more than the VM's memory. Returns the bytes
// written.
func fillPageCache(dir string, keepFree int64) int64 {
	f, err := os.Create(filepath.Join(dir, "page-cache-fill"))
	must(err)
	defer f.Close()
	buf := make([]byte, 8<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	var n int64
	for want := memInfo("MemAvailable:") - keepFree; n < want; {
		w, err := f.Write(buf)
		n += int64(w)
		must(err)
	}
	must(f.Sync()) // clean pages: the kernel reclaims them for the brokers without writeback
	return n
}

// memInfo is the /proc/meminfo line named field ("MemAvailable:"), in bytes.
func memInfo(field string) int64 {
	f, err := os.Open("/proc/meminfo")
	must(err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			must(err)
			return kb << 10
		}
	}
	fatalf("/proc/meminfo: no %s line", field)
	return 0
}

// describeFill is the settings line of a filled page cache.
func describeFill(n int64) string {
	return fmt.Sprintf("page cache filled with %.1f GB before the runs (-fill-page-cache)", float64(n)/1e9)
}
