"""Which files are "the project" of a checked file: the root above its top-level package, except
in a folder of installed distributions, where each top-level package is its own project."""

from __future__ import annotations

from flake8_graphleaf.project.resolver import FileResolver


def write(path, text="x = 1\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_package_in_site_packages_is_its_own_project(tmp_path):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    model = write(site / "alpha" / "nn" / "model.py")
    write(site / "alpha" / "__init__.py")
    write(site / "alpha" / "nn" / "__init__.py")
    write(site / "beta" / "__init__.py", "from alpha.nn.model import x\n")
    write(site / "six.py")
    resolver = FileResolver()
    options = resolver.options_for(str(model))
    assert options["module"] == "alpha.nn.model"
    files = resolver.index.files()
    assert files and all("/alpha/" in f for f in files), files
    # modules beside it are still found (imports resolve), they are only not indexed
    assert resolver.located("beta") == str(site / "beta" / "__init__.py")
    resolver.options_for(str(site / "six.py"))
    assert str(site / "six.py") in resolver.index.files()
    assert not any("/beta/" in f for f in resolver.index.files())


def test_a_source_tree_is_the_folder_above_its_top_package(tmp_path):
    model = write(tmp_path / "src" / "shop" / "model.py")
    write(tmp_path / "src" / "shop" / "__init__.py")
    write(tmp_path / "src" / "tools" / "__init__.py")
    write(tmp_path / "src" / "train.py")
    resolver = FileResolver()
    resolver.options_for(str(model))
    files = set(resolver.index.files())
    assert str(tmp_path / "src" / "train.py") in files
    assert str(tmp_path / "src" / "tools" / "__init__.py") in files
