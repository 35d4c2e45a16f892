# packaging.cmake: install rules and the Debian package (CPack DEB) of the queuebox daemon.
#
#   cmake --build build --target package     ->  build/queuebox_<version>_<arch>.deb
#
# The package holds /usr/bin/queuebox, the JSONata engine module
# /usr/lib/queuebox/libqueuebox_jsonata.so (loaded only when a transform is configured), the
# default configuration /etc/queuebox/queuebox.yml (a conffile: it starts on the embedded SQLite
# outbox in /var/lib/queuebox), the hardened unit
# /lib/systemd/system/queuebox.service, the docs, and maintainer scripts that create the
# `queuebox` system user (packaging/debian/postinst). Files: packaging/. Test: package_deb
# (packaging/test_package.sh): contents, systemd-analyze verify, and a run of the unpacked binary.

install(TARGETS queuebox RUNTIME DESTINATION bin COMPONENT queuebox)
if(TARGET queuebox_jsonata)
  # <prefix>/lib/queuebox/: where the binary looks for it, from its own folder's ../lib/queuebox
  # (src/transform/engine_module.h).
  install(TARGETS queuebox_jsonata LIBRARY DESTINATION lib/queuebox COMPONENT queuebox)
endif()
# Absolute destinations: a Debian package installs under / whatever the prefix (/usr).
install(FILES ${PROJECT_SOURCE_DIR}/packaging/queuebox.yml DESTINATION /etc/queuebox
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ COMPONENT queuebox)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/queuebox.service
        DESTINATION /lib/systemd/system COMPONENT queuebox)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/configuration.md
              ${PROJECT_SOURCE_DIR}/docs/operations.md ${PROJECT_SOURCE_DIR}/docs/guarantees.md
              ${PROJECT_SOURCE_DIR}/docs/metrics.md ${PROJECT_SOURCE_DIR}/docs/schema.md
              ${PROJECT_SOURCE_DIR}/docs/compatibility.md
        DESTINATION share/doc/queuebox COMPONENT queuebox)

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "queuebox")
set(CPACK_PACKAGE_VENDOR "QueueBox C++")
set(CPACK_PACKAGE_CONTACT "QueueBox C++ maintainers <queuebox@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Transactional outbox relay (QueueBox-compatible)")
# One string (a CMake list would put ';' into the control file); dpkg-deb indents the lines.
string(CONCAT CPACK_DEBIAN_PACKAGE_DESCRIPTION
       "QueueBox C++ claims the rows an application writes into its outbox table, in the same\n"
       "transaction as its business rows, and delivers them to HTTP, files, Kafka, RabbitMQ and\n"
       "NATS: at least once, in order per key, with retries, dead letters, replay and retention.\n"
       "This package runs it as the systemd service queuebox on the embedded SQLite outbox.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_INSTALL_DIRECTORY "queuebox")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES TRUE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # queuebox_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Shared-library dependencies from the binary (dpkg-shlibdeps), plus what the scripts call.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, init-system-helpers (>= 1.54)")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles)
# Maintainer scripts 0755, conffiles 0644, as Debian policy asks.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)

if(QUEUEBOX_BUILD_TESTS)
  add_test(NAME package_deb COMMAND bash ${PROJECT_SOURCE_DIR}/packaging/test_package.sh
                                    ${PROJECT_BINARY_DIR})
  set_tests_properties(package_deb PROPERTIES LABELS e2e TIMEOUT 900)
endif()
