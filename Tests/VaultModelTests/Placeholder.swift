// Tests for this module live beside this file.
