# `cpack -G DEB` in a build directory makes baton_<version>_<arch>.deb with
# the executables, the engine library, the plugins and the resources.
set(CPACK_PACKAGE_NAME "baton")
set(CPACK_PACKAGE_VENDOR "Baton developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Cluster-training studio: tf.distribute ideas in native C++")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Baton developers <baton@localhost>")
set(CPACK_GENERATOR "DEB")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
# Library dependencies are read off the binaries with dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
include(CPack)
