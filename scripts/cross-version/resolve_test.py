"""The script's default old build resolves in a fresh clone, which has no tags:

    python3 scripts/cross-version/resolve_test.py
"""

import os
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "cross-version.sh")
RELEASE_0_1_0 = "687167a541e6b85993e07a7a96161d219c30ef30"


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


class FreshClone(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.mkdtemp(prefix="carrier-resolve-")
        self.clone = os.path.join(self.scratch, "carrier")
        # A clone as a new user makes it, but without tags (as a mirror or CI may give), and
        # with this tree's script (which may not be committed yet).
        git("clone", "--quiet", "--no-tags", "--no-local", ROOT, self.clone, cwd=self.scratch)
        shutil.copy(SCRIPT, os.path.join(self.clone, "scripts", "cross-version.sh"))
        self.assertEqual(git("tag", "--list", cwd=self.clone), "")

    def tearDown(self):
        shutil.rmtree(self.scratch, ignore_errors=True)

    def resolve(self, *args):
        return subprocess.run(
            ["bash", os.path.join(self.clone, "scripts", "cross-version.sh"), "--resolve", *args],
            cwd=self.clone, capture_output=True, text=True,
        )

    def test_the_default_old_build_is_release_0_1_0_by_its_commit(self):
        out = self.resolve()
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), RELEASE_0_1_0)

    def test_the_release_tag_name_resolves_without_the_tag(self):
        out = self.resolve("--old", "v0.1.0")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), RELEASE_0_1_0)

    def test_an_unknown_ref_is_a_usage_error_naming_it(self):
        out = self.resolve("--old", "no-such-release")
        self.assertEqual(out.returncode, 2)
        self.assertIn("no-such-release", out.stderr)


if __name__ == "__main__":
    unittest.main()
