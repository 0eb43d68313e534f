//! An indenting line writer for C bodies.

pub struct Writer {
    out: String,
    depth: usize,
}

impl Writer {
    pub fn new(depth: usize) -> Writer {
        Writer {
            out: String::new(),
            depth,
        }
    }

    pub fn line(&mut self, text: impl AsRef<str>) {
        for _ in 0..self.depth {
            self.out.push_str("    ");
        }
        self.out.push_str(text.as_ref());
        self.out.push('\n');
    }

    /// A line that opens a block (ends in `{`).
    pub fn open(&mut self, text: impl AsRef<str>) {
        self.line(text);
        self.depth += 1;
    }

    /// Closes the innermost block.
    pub fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }

    pub fn finish(self) -> String {
        self.out
    }
}
