//! The main memory of a JIT run: one zeroed mapping, laid out as the generated `main.c`
//! lays out its arena.
//!
//! The mapping is made by the OS on first touch, so only what the program uses is ever
//! zeroed; on Linux it asks for transparent huge pages, which cut the page faults of a model
//! with hundreds of megabytes of weights and activations by a factor of 512.

/// A zeroed, page-aligned block of main memory, unmapped on drop.
pub(super) struct Arena {
    ptr: *mut u8,
    bytes: usize,
}

impl Arena {
    /// `bytes` of zeroed memory aligned to `align`, which must not exceed the page size.
    pub fn new(bytes: usize, align: usize) -> Arena {
        let bytes = bytes.max(1);
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        assert!(align <= page, "the arena is page-aligned; {align} bytes asked for");
        // SAFETY: an anonymous private mapping at an address the OS chooses, touching no
        // existing memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let layout = std::alloc::Layout::from_size_align(bytes, page).expect("a page-aligned layout");
            std::alloc::handle_alloc_error(layout);
        }
        #[cfg(target_os = "linux")]
        // SAFETY: advice on the mapping just made; failing to follow it changes nothing else.
        unsafe {
            libc::madvise(ptr, bytes, libc::MADV_HUGEPAGE);
        }
        Arena { ptr: ptr.cast(), bytes }
    }

    pub fn base(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn bytes_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.bytes),
            "inside the arena"
        );
        // SAFETY: in bounds (checked), and the arena is exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), len) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, with its length.
        unsafe { libc::munmap(self.ptr.cast(), self.bytes) };
    }
}
